package llm_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  llm.Config
		want string // message prefix
	}{
		{"unknown provider", llm.Config{Provider: "foo"}, `LLM_PROVIDER: unknown provider "foo" (want openai, anthropic or offline)`},
		{"openai without model", llm.Config{Provider: "openai", APIKey: "k"}, "LLM_MODEL: required when LLM_PROVIDER=openai"},
		{"anthropic without model", llm.Config{Provider: "anthropic", APIKey: "k"}, "LLM_MODEL: required when LLM_PROVIDER=anthropic"},
		{"public openai without key", llm.Config{Provider: "openai", Model: "gpt-4o-mini"}, "LLM_API_KEY: required for https://api.openai.com/v1"},
		{"public anthropic without key", llm.Config{Provider: "anthropic", Model: "claude"}, "LLM_API_KEY: required for https://api.anthropic.com"},
		{"bad base URL", llm.Config{Provider: "openai", Model: "m", BaseURL: "localhost:11434"}, "LLM_BASE_URL:"},
		{"negative window", llm.Config{Provider: "openai", Model: "m", APIKey: "k", ContextWindow: -1}, "LLM_CONTEXT_WINDOW:"},
		{"negative timeout", llm.Config{Provider: "openai", Model: "m", APIKey: "k", Timeout: -1}, "LLM_TIMEOUT:"},
		{"too many retries", llm.Config{Provider: "openai", Model: "m", APIKey: "k", MaxRetries: 99}, "LLM_MAX_RETRIES:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := llm.New(c.cfg)
			if err == nil {
				t.Fatalf("New returned %v, want an error", p.Name())
			}
			if !services.IsKind(err, services.EINVALID) {
				t.Errorf("kind = %s, want %s", services.ErrorKind(err), services.EINVALID)
			}
			if msg := services.ErrorMessage(err); !strings.HasPrefix(msg, c.want) {
				t.Errorf("message = %q, want prefix %q", msg, c.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cfg        llm.Config
		name       string
		wantWindow int
	}{
		{llm.Config{}, llm.ProviderOffline, 128000},
		{llm.Config{Provider: " OpenAI ", Model: "m", APIKey: "k"}, llm.ProviderOpenAI, 128000},
		{llm.Config{Provider: "openai", Model: "m", BaseURL: "http://localhost:11434/v1"}, llm.ProviderOpenAI, 128000},
		{llm.Config{Provider: "anthropic", Model: "m", APIKey: "k"}, llm.ProviderAnthropic, 200000},
		{llm.Config{Provider: "anthropic", Model: "m", APIKey: "k", ContextWindow: 1000}, llm.ProviderAnthropic, 1000},
	}
	for _, c := range cases {
		p, err := llm.New(c.cfg)
		if err != nil {
			t.Errorf("New(%v): %v", c.cfg, err)
			continue
		}
		if p.Name() != c.name || p.ContextWindow() != c.wantWindow {
			t.Errorf("New(%v) = %s with window %d, want %s with %d", c.cfg, p.Name(), p.ContextWindow(), c.name, c.wantWindow)
		}
	}
}

// TestConfigStringHidesKey: Config's description for logs never shows the
// API key. (Reading the environment is cmd/switchboard's Config: its tests
// check every LLM_* variable reaches the provider and bad values name theirs.)
func TestConfigStringHidesKey(t *testing.T) {
	t.Parallel()
	cfg := llm.Config{Provider: "anthropic", BaseURL: "http://proxy:8080", APIKey: "secret", Model: "claude"}
	if s := cfg.String(); strings.Contains(s, "secret") || !strings.Contains(s, "api_key=set") {
		t.Errorf("String() = %s", s)
	}
}
