package llm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

func TestOfflineExplainsConfiguration(t *testing.T) {
	t.Parallel()
	p, err := llm.New(llm.Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if p.Name() != llm.ProviderOffline || p.ContextWindow() != llm.DefaultOfflineContextWindow {
		t.Errorf("Name = %q, ContextWindow = %d", p.Name(), p.ContextWindow())
	}
	// The prompt's input starts with the date and channel line; the answer
	// quotes the owner's words.
	req := userRequest(services.InputHeaderPrefix + "Wednesday 2026-11-25 09:10 UTC. This message came through the web page.]\n\nplease summarise my inbox")
	req.Tools = []services.ToolSpec{readFileTool}
	var deltas []string
	resp, err := p.Complete(context.Background(), req, func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	for _, want := range []string{"No language model is configured", "LLM_PROVIDER=openai", "anthropic",
		"LLM_BASE_URL", "LLM_API_KEY", "LLM_MODEL", "LLM_CONTEXT_WINDOW", `"please summarise my inbox"`} {
		if !strings.Contains(resp.Text, want) {
			t.Errorf("offline answer lacks %q:\n%s", want, resp.Text)
		}
	}
	if len(deltas) < 3 || strings.Join(deltas, "") != resp.Text {
		t.Errorf("got %d deltas joining to the text: %v", len(deltas), strings.Join(deltas, "") == resp.Text)
	}
	if len(resp.ToolCalls) != 0 || resp.StopReason != llm.StopEnd {
		t.Errorf("ToolCalls = %v, StopReason = %q", resp.ToolCalls, resp.StopReason)
	}
	if resp.Usage.PromptTokens <= 0 || resp.Usage.CompletionTokens != (len(resp.Text)+3)/4 {
		t.Errorf("Usage = %+v", resp.Usage)
	}

	again, err := p.Complete(context.Background(), req, nil)
	if err != nil || again.Text != resp.Text {
		t.Errorf("second answer differs or failed (%v)", err)
	}
}

func TestOfflineEchoIsShort(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 200)
	resp, err := llm.NewOffline(0).Complete(context.Background(), userRequest(long), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(resp.Text, "word") > 20 {
		t.Errorf("offline answer echoes too much of the message:\n%s", resp.Text)
	}
}

// TestOfflineHelpsOncePerConversation: once the conversation holds the
// whole help, later answers are one line pointing at it, not the same
// twelve lines again.
func TestOfflineHelpsOncePerConversation(t *testing.T) {
	t.Parallel()
	p := llm.NewOffline(0)
	first, err := p.Complete(context.Background(), userRequest("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req := userRequest("are you there?")
	req.Messages = append([]llm.Message{{Role: llm.RoleUser, Content: "hello"}, {Role: llm.RoleAssistant, Content: first.Text}}, req.Messages...)
	second, err := p.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(second.Text, "LLM_BASE_URL") || !strings.Contains(second.Text, "Still no language model is configured") ||
		!strings.Contains(second.Text, `"are you there?"`) {
		t.Errorf("second answer:\n%s", second.Text)
	}
}
