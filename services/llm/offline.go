package llm

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// Offline is the provider used when no model is configured. It answers every
// request with the same explanation of how to configure one, never calls
// tools and never fails, so Switchboard runs end to end without a model.
type Offline struct {
	window int
}

var _ Provider = (*Offline)(nil)

// NewOffline returns the offline provider; contextWindow 0 means
// DefaultOfflineContextWindow.
func NewOffline(contextWindow int) *Offline { return newOffline(contextWindow) }

func newOffline(window int) *Offline {
	if window <= 0 {
		window = DefaultOfflineContextWindow
	}
	return &Offline{window: window}
}

// Name returns "offline".
func (o *Offline) Name() string { return ProviderOffline }

// Model returns "offline".
func (o *Offline) Model() string { return ProviderOffline }

// ContextWindow returns the nominal context window.
func (o *Offline) ContextWindow() int { return o.window }

// offlineHelp is the fixed part of every offline answer.
const offlineHelp = `No language model is configured, so Switchboard cannot answer yet.

To connect one, set these environment variables and restart Switchboard:

- LLM_PROVIDER=openai for OpenAI or any OpenAI-compatible server (Ollama, vLLM, llama.cpp, DeepSeek, OpenRouter), or LLM_PROVIDER=anthropic for Claude
- LLM_BASE_URL: the server address, e.g. http://localhost:11434/v1 for Ollama (leave unset for api.openai.com or api.anthropic.com)
- LLM_API_KEY: the API key (required for OpenAI and Anthropic; local servers usually need none)
- LLM_MODEL: the model name, e.g. gpt-4o-mini, claude-sonnet-4-5 or llama3.1
- LLM_CONTEXT_WINDOW: optional, the model's context window in tokens (default 128000 for openai, 200000 for anthropic)
`

// offlineReminder is the offline answer once the conversation already
// holds the whole help: one line instead of the same twelve again.
const offlineReminder = "Still no language model is configured (LLM_PROVIDER is offline): the setup steps are in my earlier answer above and in the README."

// Complete returns the configuration help, preceded by a short echo of the
// last user message, streamed paragraph by paragraph when onDelta is
// non-nil. Usage is estimated at four characters per token. It never fails
// unless ctx is done (EUNAVAILABLE, CodeCancelled).
func (o *Offline) Complete(ctx context.Context, req Request, onDelta func(string)) (*Response, error) {
	if ctx.Err() != nil {
		return nil, cancelled(ctx)
	}
	var b strings.Builder
	if last := lastUserMessage(req.Messages); last != "" {
		fmt.Fprintf(&b, "You said: %q\n\n", truncate(strings.Join(strings.Fields(last), " "), 80))
	}
	if helped(req.Messages) {
		b.WriteString(offlineReminder)
	} else {
		b.WriteString(offlineHelp)
	}
	text := b.String()
	if onDelta != nil {
		for _, part := range strings.SplitAfter(text, "\n\n") {
			if part != "" {
				onDelta(part)
			}
		}
	}
	prompt := len(req.System)
	for _, m := range req.Messages {
		prompt += len(m.Content)
	}
	for _, t := range req.Tools {
		prompt += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return &Response{
		Text:       text,
		StopReason: StopEnd,
		Model:      ProviderOffline,
		Usage:      services.TokenUsage{PromptTokens: (prompt + 3) / 4, CompletionTokens: (len(text) + 3) / 4},
	}, nil
}

// helped reports whether the conversation sent holds an earlier offline
// answer with the whole help.
func helped(msgs []Message) bool {
	first, _, _ := strings.Cut(offlineHelp, "\n")
	for _, m := range msgs {
		if m.Role == RoleAssistant && strings.Contains(m.Content, first) {
			return true
		}
	}
	return false
}

func lastUserMessage(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return services.StripInputHeader(msgs[i].Content)
		}
	}
	return ""
}
