package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// DefaultAnthropicBaseURL is used when Config.BaseURL is empty.
const DefaultAnthropicBaseURL = "https://api.anthropic.com"

// Anthropic is a Provider speaking the Anthropic Messages API. It makes one
// attempt per call; wrap it with Retry (New does).
type Anthropic struct {
	client  *http.Client
	apiKey  string
	model   string
	baseURL string
	window  int
}

var _ Provider = (*Anthropic)(nil)

// anthropicVersion is the API version sent as anthropic-version.
const anthropicVersion = "2023-06-01"

// NewAnthropic returns an Anthropic provider for cfg after applying the same
// defaults and validation as New; the error is an EINVALID *services.Error
// naming the offending environment variable.
func NewAnthropic(cfg Config) (*Anthropic, error) {
	cfg.Provider = ProviderAnthropic
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return newAnthropic(cfg), nil
}

// newAnthropic is the provider for a normalized cfg. Only LLM_* configures
// it, never ANTHROPIC_* from the environment.
func newAnthropic(cfg Config) *Anthropic {
	return &Anthropic{client: cfg.httpClient(), apiKey: cfg.APIKey, model: cfg.Model, baseURL: cfg.BaseURL, window: cfg.ContextWindow}
}

// Name returns "anthropic".
func (p *Anthropic) Name() string { return ProviderAnthropic }

// Model returns the configured model.
func (p *Anthropic) Model() string { return p.model }

// ContextWindow returns the configured context window in tokens.
func (p *Anthropic) ContextWindow() int { return p.window }

// BaseURL returns the server address requests go to.
func (p *Anthropic) BaseURL() string { return p.baseURL }

// Complete implements Provider with one Messages request, streamed when
// onDelta is non-nil. Errors are as documented on Provider.
func (p *Anthropic) Complete(ctx context.Context, req Request, onDelta func(string)) (*Response, error) {
	body, err := p.anthropicBody(req, onDelta != nil)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	header.Set("Anthropic-Version", anthropicVersion)
	if onDelta != nil {
		header.Set("Accept", "text/event-stream")
	} else {
		header.Set("Accept", "application/json")
	}
	if p.apiKey != "" {
		header.Set("X-Api-Key", p.apiKey)
	}
	resp, err := post(ctx, p.client, strings.TrimRight(p.baseURL, "/")+"/v1/messages", header, body)
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	if onDelta == nil {
		var msg anthropicMessage
		if err := readJSON(resp, &msg); err != nil {
			return nil, p.failure(ctx, err)
		}
		return p.response(&msg)
	}
	defer resp.Body.Close()
	msg, err := anthropicStream(resp.Body, onDelta)
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	return p.response(msg)
}

// anthropicMessage is the part of a Messages reply that is read.
type anthropicMessage struct {
	Model      string                  `json:"model"`
	Content    []anthropicContentBlock `json:"content"`
	StopReason string                  `json:"stop_reason"`
	Usage      anthropicUsage          `json:"usage"`
}

type anthropicContentBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

// anthropicEvent is a streamed event of the Messages API.
type anthropicEvent struct {
	Type         string                `json:"type"`
	Message      anthropicMessage      `json:"message"`
	Index        int                   `json:"index"`
	ContentBlock anthropicContentBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicStream reads a streamed reply, passing text to onDelta, into the
// message it adds up to. Tool inputs are the joined input_json_delta
// fragments, kept as they came: malformed input is the model's mistake to
// be told about (toolCall), not replaced.
func anthropicStream(body io.Reader, onDelta func(string)) (*anthropicMessage, error) {
	var msg anthropicMessage
	inputs := map[int]*strings.Builder{}
	sse := newSSEReader(body)
	for {
		e, ok := sse.next()
		if !ok {
			break
		}
		if e.typ == "ping" || len(bytes.TrimSpace(e.data)) == 0 {
			continue
		}
		var ev anthropicEvent
		err := json.Unmarshal(e.data, &ev)
		if e.typ == "error" || (err == nil && ev.Type == "error") {
			if ev.Error.Type == "" && ev.Error.Message == "" {
				return nil, fmt.Errorf("%w: %s", errStreamFailed, truncate(string(e.data), 300))
			}
			// overloaded_error, api_error: retried as a failed stream.
			return nil, fmt.Errorf("%w: %s %s", errStreamFailed, ev.Error.Type, ev.Error.Message)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: event %q: %v", errBadReply, truncate(string(e.data), 200), err)
		}
		switch ev.Type {
		case "message_start":
			msg = ev.Message
			msg.Content = nil
		case "content_block_start":
			if ev.Index != len(msg.Content) {
				return nil, fmt.Errorf("%w: content block %d started after %d blocks", errBadReply, ev.Index, len(msg.Content))
			}
			msg.Content = append(msg.Content, ev.ContentBlock)
			if ev.ContentBlock.Type == "tool_use" {
				inputs[ev.Index] = &strings.Builder{}
			}
		case "content_block_delta":
			if ev.Index < 0 || ev.Index >= len(msg.Content) {
				return nil, fmt.Errorf("%w: a delta for content block %d of %d", errBadReply, ev.Index, len(msg.Content))
			}
			switch ev.Delta.Type {
			case "text_delta":
				msg.Content[ev.Index].Text += ev.Delta.Text
				if ev.Delta.Text != "" {
					onDelta(ev.Delta.Text)
				}
			case "input_json_delta":
				if b := inputs[ev.Index]; b != nil {
					b.WriteString(ev.Delta.PartialJSON)
				}
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				msg.StopReason = ev.Delta.StopReason
			}
			if u := ev.Usage; u != nil {
				msg.Usage.OutputTokens = u.OutputTokens
				if u.InputTokens != 0 {
					msg.Usage.InputTokens = u.InputTokens
				}
				if u.CacheReadInputTokens != 0 {
					msg.Usage.CacheReadInputTokens = u.CacheReadInputTokens
				}
				if u.CacheCreationInputTokens != 0 {
					msg.Usage.CacheCreationInputTokens = u.CacheCreationInputTokens
				}
			}
		case "message_stop":
			for i, b := range inputs {
				if b.Len() > 0 {
					msg.Content[i].Input = json.RawMessage(b.String())
				}
			}
			return &msg, nil
		}
	}
	if sse.err != nil {
		return nil, sse.err
	}
	return nil, errStreamTruncated
}

// The request's JSON, field for field as Anthropic's SDK wrote it (the bytes
// the provider caches stay those of earlier releases).
type (
	anthropicCacheControl struct {
		Type string `json:"type"`
	}
	anthropicText struct {
		Text         string                 `json:"text"`
		CacheControl *anthropicCacheControl `json:"cache_control,omitempty"`
		Type         string                 `json:"type"`
	}
	anthropicImage struct {
		Source struct {
			Data      string `json:"data"`
			MediaType string `json:"media_type,omitempty"`
			Type      string `json:"type"`
		} `json:"source"`
		CacheControl *anthropicCacheControl `json:"cache_control,omitempty"`
		Type         string                 `json:"type"`
	}
	anthropicToolUse struct {
		ID           string                 `json:"id"`
		Input        json.RawMessage        `json:"input,omitempty"`
		Name         string                 `json:"name"`
		CacheControl *anthropicCacheControl `json:"cache_control,omitempty"`
		Type         string                 `json:"type"`
	}
	anthropicToolResult struct {
		ToolUseID    string                 `json:"tool_use_id"`
		IsError      bool                   `json:"is_error,omitempty"`
		CacheControl *anthropicCacheControl `json:"cache_control,omitempty"`
		Content      []any                  `json:"content,omitempty"`
		Type         string                 `json:"type"`
	}
	anthropicTool struct {
		InputSchema  anthropicSchema        `json:"input_schema"`
		Name         string                 `json:"name"`
		Description  string                 `json:"description,omitempty"`
		CacheControl *anthropicCacheControl `json:"cache_control,omitempty"`
	}
	// anthropicHead is the request's small parameters.
	anthropicHead struct {
		MaxTokens     int      `json:"max_tokens"`
		Model         string   `json:"model,omitempty"`
		Temperature   *float64 `json:"temperature,omitempty"`
		StopSequences []string `json:"stop_sequences,omitempty"`
	}
)

func ephemeral() *anthropicCacheControl { return &anthropicCacheControl{Type: "ephemeral"} }

func textBlock(text string) *anthropicText { return &anthropicText{Text: text, Type: "text"} }

func imageBlock(im services.Image) *anthropicImage {
	b := &anthropicImage{Type: "image"}
	b.Source.Data, b.Source.MediaType, b.Source.Type = base64.StdEncoding.EncodeToString(im.Data), im.MIMEType, "base64"
	return b
}

// anthropicSchema is a tool's JSON Schema: properties, required and type
// first, the other keywords after them in key order.
type anthropicSchema map[string]any

func (s anthropicSchema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	add := func(k string, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(raw)
		return nil
	}
	if v, ok := s["properties"]; ok && v != nil {
		if err := add("properties", v); err != nil {
			return nil, err
		}
	}
	var required []string
	if list, ok := s["required"].([]any); ok {
		for _, r := range list {
			if name, ok := r.(string); ok {
				required = append(required, name)
			}
		}
	}
	if len(required) > 0 {
		_ = add("required", required)
	}
	_ = add("type", "object")
	var extra []string
	for k := range s {
		if k != "type" && k != "properties" && k != "required" {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		if err := add(k, s[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// anthropicSystem is the request's system blocks: the system prompt (the
// cache breakpoint when the request caches it), then the system context.
func anthropicSystem(req Request) []*anthropicText {
	var system []*anthropicText
	if req.System != "" {
		sys := textBlock(req.System)
		if req.CacheSystem {
			sys.CacheControl = ephemeral()
		}
		system = []*anthropicText{sys}
	}
	if req.SystemContext != "" {
		// After the breakpoint: it changes without breaking the cached prefix.
		system = append(system, textBlock(req.SystemContext))
	}
	return system
}

// anthropicTools is the request's tool definitions.
func anthropicTools(req Request) ([]anthropicTool, error) {
	var out []anthropicTool
	for i, t := range req.Tools {
		schema, err := schemaObject(t)
		if err != nil {
			return out, err
		}
		tool := anthropicTool{Name: t.Name, Description: t.Description, InputSchema: schema}
		if req.CacheSystem && req.System == "" && i == len(req.Tools)-1 {
			// Tools come first in Anthropic's prefix order (tools, system,
			// messages); the system block's breakpoint covers them, and
			// without a system prompt a breakpoint on the last tool does.
			tool.CacheControl = ephemeral()
		}
		out = append(out, tool)
	}
	return out, nil
}

// anthropicBlocks is message i's role and content blocks: a user's text
// and images, an assistant's text and tool calls, a tool result (sent as
// the user's) with its images.
func anthropicBlocks(i int, m Message) (string, []any, error) {
	var blocks []any
	switch m.Role {
	case RoleUser:
		if m.Content != "" { // empty text blocks are refused
			blocks = append(blocks, textBlock(m.Content))
		}
		for _, im := range m.Images {
			blocks = append(blocks, imageBlock(im))
		}
		return roleUser, blocks, nil
	case RoleAssistant:
		if m.Content != "" {
			blocks = append(blocks, textBlock(m.Content))
		}
		for _, tc := range m.ToolCalls {
			args, ok := toolArguments(tc.Arguments)
			if !ok {
				return "", nil, services.Errorf(services.EINVALID, "message %d: tool call %q has arguments that are not a JSON object", i, tc.Name)
			}
			blocks = append(blocks, &anthropicToolUse{ID: tc.ID, Input: json.RawMessage(args), Name: tc.Name, Type: "tool_use"})
		}
		return roleAssistant, blocks, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return "", nil, services.Errorf(services.EINVALID, "message %d: tool message without ToolCallID", i)
		}
		result := &anthropicToolResult{ToolUseID: m.ToolCallID, IsError: m.IsError, Type: "tool_result"}
		if m.Content != "" {
			result.Content = []any{textBlock(m.Content)}
		}
		for _, im := range m.Images {
			result.Content = append(result.Content, imageBlock(im))
		}
		return roleUser, []any{result}, nil
	default:
		return "", nil, services.Errorf(services.EINVALID, "message %d: unknown role %q", i, m.Role)
	}
}

// The roles of Anthropic's API messages.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// maxCachePoints is the Messages API's limit of cache_control blocks.
const maxCachePoints = 4

// setCacheControl puts a cache breakpoint on block b.
func setCacheControl(b any) {
	switch b := b.(type) {
	case *anthropicText:
		b.CacheControl = ephemeral()
	case *anthropicImage:
		b.CacheControl = ephemeral()
	case *anthropicToolUse:
		b.CacheControl = ephemeral()
	case *anthropicToolResult:
		b.CacheControl = ephemeral()
	}
}

// responseFormatInstruction asks in words for the JSON answer rf describes
// ("" for none).
func responseFormatInstruction(rf *services.ResponseFormat) string {
	if rf == nil {
		return ""
	}
	switch rf.Type {
	case services.ResponseJSONObject:
		return "Answer with one JSON object only: no prose, no code fence."
	case services.ResponseJSONSchema:
		return "Answer with JSON only (no prose, no code fence) that is valid against this JSON Schema:\n" + string(rf.Schema)
	}
	return ""
}

// response translates a (possibly accumulated) message into a Response.
// inputs holds streamed tool inputs by content block index.
func (p *Anthropic) response(msg *anthropicMessage) (*Response, error) {
	resp := &Response{
		Model: string(msg.Model),
		Usage: services.TokenUsage{
			PromptTokens:     msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens,
			CompletionTokens: msg.Usage.OutputTokens,
			CachedTokens:     msg.Usage.CacheReadInputTokens,
			CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
		},
	}
	if resp.Model == "" {
		resp.Model = p.model
	}
	var text strings.Builder
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			text.WriteString(block.Text)
		case "tool_use":
			raw := []byte(block.Input)
			resp.ToolCalls = append(resp.ToolCalls, toolCall(block.ID, block.Name, raw))
		}
	}
	resp.Text = text.String()
	switch msg.StopReason {
	case "end_turn", "stop_sequence":
		resp.StopReason = StopEnd
	case "tool_use":
		resp.StopReason = StopToolCalls
	case "max_tokens":
		resp.StopReason = StopMaxTokens
	default:
		resp.StopReason = StopOther
	}
	return resp, nil
}

// failure classifies a failed call.
func (p *Anthropic) failure(ctx context.Context, err error) error {
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		info := &statusInfo{status: apiErr.status, header: apiErr.header, message: parseErrorBody(apiErr.body).Message}
		return providerFailure(ctx, ProviderAnthropic, p.model, err, info)
	}
	return providerFailure(ctx, ProviderAnthropic, p.model, err, nil)
}
