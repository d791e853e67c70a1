// Package llm is Switchboard's model provider layer: one Provider interface
// with streaming and native tool calls, implemented for OpenAI-compatible chat
// completions (OpenAI, Ollama, vLLM, llama.cpp, DeepSeek, OpenRouter), the
// Anthropic Messages API, and an offline provider that explains how to
// configure a model. Retry wraps any provider with bounded retries; New builds
// the configured provider, already wrapped.
//
// Every error a provider returns is a *services.Error whose Message is safe to
// show to the owner; the cause, when it came from the model server, is a
// *ProviderError reachable with errors.As.
package llm

import (
	"context"

	"github.com/switchboard/switchboard/services"
)

// Provider names, as accepted by LLM_PROVIDER and returned by Provider.Name.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderOffline   = "offline"
)

// Provider is one configured model behind one API.
type Provider interface {
	// Name is the provider kind: "openai", "anthropic" or "offline".
	Name() string
	// Model is the model identifier sent to the provider.
	Model() string
	// ContextWindow is the model's context window in tokens.
	ContextWindow() int
	// Complete sends one request and returns the model's reply. When onDelta is
	// non-nil the reply is streamed and onDelta is called, on the calling
	// goroutine, with each text fragment as it arrives; the fragments join to
	// Response.Text. Tool calls are returned whole in Response.ToolCalls, never
	// through onDelta.
	//
	// Errors are *services.Error values: EINVALID for a malformed request or one
	// the provider refused (Code CodeRejected), ETOOLARGE when the provider
	// refused the request as too large, EUNAVAILABLE when the model could not
	// be reached or answered badly (Codes CodeUnreachable, CodeAuth,
	// CodeStreamInterrupted, CodeMalformedToolCall, CodeCancelled). A
	// cancelled ctx yields an error that also matches ctx.Err() with errors.Is.
	Complete(ctx context.Context, req Request, onDelta func(text string)) (*Response, error)
}

// Role is the author of a Message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Request is one model call: the system prompt, the tools, and the
// conversation so far.
type Request struct {
	// System is the system prompt. Empty means none.
	System string
	// CacheSystem marks the stable prefix (system prompt and tool definitions)
	// as cacheable: Anthropic gets a cache_control breakpoint on the system
	// block (on the last tool when there is no system prompt), on each
	// message of CacheAt and on the last message; OpenAI-compatible servers
	// cache prefixes automatically, so it changes nothing there.
	CacheSystem bool
	// CacheAt are indexes into Messages where a cached prefix ends, oldest
	// first: the prompt marks the end of the history it sends and the end
	// of the turn before, so a turn reads the prefix the previous turn
	// wrote (with CacheSystem; at most 4 breakpoints in all, the oldest
	// message marks dropped first).
	CacheAt []int
	// SystemContext is system content that changes more often than the
	// stable prefix (the archived summary). It follows System, outside the
	// cached prefix: Anthropic gets it as a second system block after the
	// cache_control breakpoint; OpenAI-compatible servers get it appended
	// to the one system message (several system messages, or one in the
	// middle of the conversation, are refused by some servers' chat
	// templates), so the prefix bytes they cache stay the same.
	SystemContext string
	// Messages is the conversation, oldest first.
	Messages []Message
	// Tools the model may call. Empty means no tools.
	Tools []services.ToolSpec
	// MaxTokens bounds the reply; 0 leaves the provider default (Anthropic,
	// which requires a value, gets DefaultMaxTokens).
	MaxTokens int
	// Temperature is the sampling temperature; nil leaves the provider default.
	Temperature *float64
	// Stop sequences end the reply where they appear; empty: none.
	Stop []string
	// ResponseFormat asks for a JSON reply (OpenAI-compatible: the
	// response_format parameter; Anthropic: an instruction after the
	// conversation); nil: text.
	ResponseFormat *services.ResponseFormat
}

// EstimateTokens estimates r's prompt tokens with count (a tokenizer's),
// before a call, for the budget's reservation: its texts, tool
// definitions and calls, a few tokens of framing each, and 800 an image.
func (r Request) EstimateTokens(count func(string) int) int {
	n := count(r.System) + count(r.SystemContext)
	for _, t := range r.Tools {
		n += count(t.Name) + count(t.Description) + count(string(t.Parameters)) + 8
	}
	for _, m := range r.Messages {
		n += count(m.Content) + 4
		for _, c := range m.ToolCalls {
			n += count(c.Name) + count(string(c.Arguments)) + 4
		}
		n += 800 * len(m.Images)
	}
	return n
}

// Message is one entry of the conversation sent to the model.
type Message struct {
	Role Role
	// Content is the text of a user or assistant message, or the output of a
	// tool for a tool message.
	Content string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []services.ToolCall
	// ToolCallID names the call a tool message answers.
	ToolCallID string
	// IsError marks a tool message whose tool failed.
	IsError bool
	// Images of a tool message go to the model with its result (Anthropic:
	// in the tool_result; OpenAI-compatible: in a user message after the
	// tool messages, since tool messages carry text only). Images of a user
	// message follow its text as image parts (blocks).
	Images []services.Image
}

// Stop reasons, normalised across providers.
const (
	StopEnd       = "end"        // the model finished its answer
	StopToolCalls = "tool_calls" // the model wants tool results
	StopMaxTokens = "max_tokens" // the reply hit MaxTokens
	StopOther     = "other"      // anything else (content filter, refusal, ...)
)

// Response is the model's reply to one Request.
type Response struct {
	// Text is the reply's text; with streaming, the join of every delta.
	Text      string
	ToolCalls []services.ToolCall
	// StopReason is one of StopEnd, StopToolCalls, StopMaxTokens, StopOther.
	StopReason string
	Usage      services.TokenUsage
	// Model is the model that answered, as reported by the provider.
	Model string
}

// DefaultMaxTokens is the reply bound sent to Anthropic when
// Request.MaxTokens is 0, since its API requires one.
const DefaultMaxTokens = 4096
