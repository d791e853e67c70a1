package llm

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
)

// Defaults applied by New when the corresponding Config field is zero.
const (
	DefaultOpenAIContextWindow    = 128000
	DefaultAnthropicContextWindow = 200000
	DefaultOfflineContextWindow   = 128000
	DefaultTimeout                = 5 * time.Minute
	DefaultMaxRetries             = 2
)

// Config selects and configures the model provider. The environment
// variable named in each field's comment sets it (cmd/switchboard's Config
// is the only reader of the environment).
type Config struct {
	// Provider is LLM_PROVIDER: "openai" (any OpenAI-compatible server),
	// "anthropic" or "offline". Empty means offline.
	Provider string
	// BaseURL is LLM_BASE_URL, e.g. http://localhost:11434/v1 for Ollama.
	// Empty means the provider's public API.
	BaseURL string
	// APIKey is LLM_API_KEY. Required for the public OpenAI and Anthropic
	// APIs; optional for other servers.
	APIKey string
	// Model is LLM_MODEL, required for openai and anthropic.
	Model string
	// ContextWindow is LLM_CONTEXT_WINDOW in tokens; 0 means the provider
	// default (128000 for openai, 200000 for anthropic).
	ContextWindow int
	// Timeout is LLM_TIMEOUT, the limit on one attempt including a streamed
	// reply; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is LLM_MAX_RETRIES, retries after the first attempt; 0
	// means DefaultMaxRetries, a negative value disables retries.
	MaxRetries int
	// RetryBaseDelay is the first backoff, doubled on each retry; 0 means
	// DefaultRetryPolicy's. Not read from the environment (tests set it).
	RetryBaseDelay time.Duration
	// HTTPClient is the client for provider requests; nil means a new
	// http.Client without a timeout (Timeout bounds each attempt instead).
	HTTPClient *http.Client
}

// New returns the provider cfg selects, wrapped in Retry (except offline,
// which cannot fail). Validation errors are EINVALID *services.Error values
// whose message starts with the environment variable at fault, e.g.
// `LLM_PROVIDER: unknown provider "foo" (want openai, anthropic or offline)`.
func New(cfg Config) (Provider, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	var p Provider
	switch cfg.Provider {
	case ProviderOffline:
		return newOffline(cfg.ContextWindow), nil
	case ProviderOpenAI:
		p = newOpenAI(cfg)
	case ProviderAnthropic:
		p = newAnthropic(cfg)
	}
	policy := DefaultRetryPolicy()
	policy.MaxRetries = max(cfg.MaxRetries, 0)
	if cfg.RetryBaseDelay > 0 {
		policy.BaseDelay = cfg.RetryBaseDelay
		policy.MaxDelay = max(policy.MaxDelay, cfg.RetryBaseDelay)
	}
	policy.AttemptTimeout = cfg.Timeout
	return Retry(p, policy), nil
}

// normalize validates cfg and fills in defaults.
func (cfg Config) normalize() (Config, error) {
	invalid := func(format string, args ...any) (Config, error) {
		return cfg, services.Errorf(services.EINVALID, format, args...)
	}
	cfg.Provider = strings.ToLower(strings.TrimSpace(cfg.Provider))
	cfg.BaseURL = strings.TrimSpace(cfg.BaseURL)
	cfg.Model = strings.TrimSpace(cfg.Model)
	cfg.APIKey = strings.TrimSpace(cfg.APIKey)
	if cfg.Provider == "" {
		cfg.Provider = ProviderOffline
	}
	if cfg.ContextWindow < 0 {
		return invalid("LLM_CONTEXT_WINDOW: %d is negative (want the model's context window in tokens, e.g. 128000)", cfg.ContextWindow)
	}
	if cfg.Timeout < 0 {
		return invalid("LLM_TIMEOUT: %s is negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.MaxRetries > 10 {
		return invalid("LLM_MAX_RETRIES: %d is too many (want 0 to 10)", cfg.MaxRetries)
	}

	var defaultURL string
	switch cfg.Provider {
	case ProviderOffline:
		if cfg.ContextWindow == 0 {
			cfg.ContextWindow = DefaultOfflineContextWindow
		}
		return cfg, nil
	case ProviderOpenAI:
		defaultURL = DefaultOpenAIBaseURL
		if cfg.ContextWindow == 0 {
			cfg.ContextWindow = DefaultOpenAIContextWindow
		}
	case ProviderAnthropic:
		defaultURL = DefaultAnthropicBaseURL
		if cfg.ContextWindow == 0 {
			cfg.ContextWindow = DefaultAnthropicContextWindow
		}
	default:
		return invalid("LLM_PROVIDER: unknown provider %q (want openai, anthropic or offline)", cfg.Provider)
	}

	if cfg.Model == "" {
		return invalid("LLM_MODEL: required when LLM_PROVIDER=%s (the model name the server serves, e.g. %s)", cfg.Provider, exampleModel(cfg.Provider))
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = defaultURL
		if cfg.APIKey == "" {
			return invalid("LLM_API_KEY: required for %s; set it, or point LLM_BASE_URL at a server that needs none", defaultURL)
		}
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("LLM_BASE_URL: %q is not an http(s) URL (e.g. http://localhost:11434/v1)", cfg.BaseURL)
	}
	if cfg.Provider == ProviderAnthropic {
		// The provider adds /v1/messages itself; a base ending in /v1 is a common
		// copy from OpenAI-style settings.
		cfg.BaseURL = strings.TrimSuffix(strings.TrimRight(cfg.BaseURL, "/"), "/v1")
	}
	return cfg, nil
}

func exampleModel(provider string) string {
	if provider == ProviderAnthropic {
		return "claude-sonnet-4-5"
	}
	return "gpt-4o-mini, or llama3.1 on Ollama"
}

// httpClient is the client the providers use: the configured one (or a new
// one), its transport recording request bodies for a Capture.
func (cfg Config) httpClient() *http.Client {
	if cfg.HTTPClient != nil {
		return capturing(cfg.HTTPClient)
	}
	return capturing(&http.Client{})
}

// String describes cfg for logs and /status without the API key.
func (cfg Config) String() string {
	key := "unset"
	if cfg.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("provider=%s base_url=%s model=%s context_window=%d api_key=%s",
		cfg.Provider, cfg.BaseURL, cfg.Model, cfg.ContextWindow, key)
}
