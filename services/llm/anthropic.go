package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/switchboard/switchboard/services"
)

// DefaultAnthropicBaseURL is used when Config.BaseURL is empty.
const DefaultAnthropicBaseURL = "https://api.anthropic.com"

// Anthropic is a Provider speaking the Anthropic Messages API. It makes one
// attempt per call; wrap it with Retry (New does).
type Anthropic struct {
	messages anthropic.MessageService
	model    string
	baseURL  string
	window   int
}

var _ Provider = (*Anthropic)(nil)

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

func newAnthropic(cfg Config) *Anthropic {
	client := anthropic.NewClient(
		// Only LLM_* configures the provider, never ANTHROPIC_* or profiles.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(cfg.httpClient()),
		option.WithMaxRetries(0), // Retry is the only retry layer
		// An explicit timeout also stops the SDK from refusing non-streaming
		// calls with a large max_tokens.
		option.WithRequestTimeout(cfg.Timeout),
	)
	return &Anthropic{messages: client.Messages, model: cfg.Model, baseURL: cfg.BaseURL, window: cfg.ContextWindow}
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
	var params anthropic.MessageNewParams
	var opts []option.RequestOption
	var err error
	if splicing() {
		params, opts, err = p.anthropicOptions(req)
	} else {
		params, err = p.params(req)
	}
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		msg, err := p.messages.New(ctx, params, opts...)
		if err != nil {
			return nil, p.failure(ctx, err)
		}
		return p.response(msg, nil)
	}

	stream := p.messages.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var msg anthropic.Message
	// Tool inputs are gathered here too: the SDK's accumulator quietly
	// replaces malformed input with {}, which would hide the model's mistake.
	inputs := map[int64]*strings.Builder{}
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, p.failure(ctx, fmt.Errorf("%w: %v", errBadReply, err))
		}
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				inputs[ev.Index] = &strings.Builder{}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" {
					onDelta(ev.Delta.Text)
				}
			case "input_json_delta":
				if b := inputs[ev.Index]; b != nil {
					b.WriteString(ev.Delta.PartialJSON)
				}
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.failure(ctx, err)
	}
	if !stopped {
		return nil, p.failure(ctx, errStreamTruncated)
	}
	return p.response(&msg, inputs)
}

// params translates a Request into Messages API parameters.
func (p *Anthropic) params(req Request) (anthropic.MessageNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := anthropic.MessageNewParams{Model: anthropic.Model(p.model), MaxTokens: int64(maxTokens), System: anthropicSystem(req)}
	var err error
	if params.Tools, err = anthropicTools(req); err != nil {
		return params, err
	}
	var lastBlock [][2]int
	if params.Messages, lastBlock, err = anthropicMessages(req.Messages); err != nil {
		return params, err
	}
	if req.CacheSystem {
		markCachePoints(&params, req, lastBlock)
	}
	if req.Temperature != nil {
		params.Temperature = anthropic.Float(*req.Temperature)
	}
	if len(req.Stop) > 0 {
		params.StopSequences = req.Stop
	}
	if text := responseFormatInstruction(req.ResponseFormat); text != "" {
		// The Messages API has no response_format: the instruction closes
		// the conversation, after the user's turn (or the tool results).
		params.Messages = addBlocks(params.Messages, anthropic.MessageParamRoleUser, anthropic.NewTextBlock(text))
	}
	return params, nil
}

// anthropicSystem is the request's system blocks: the system prompt (the
// cache breakpoint when the request caches it), then the system context.
func anthropicSystem(req Request) []anthropic.TextBlockParam {
	var system []anthropic.TextBlockParam
	if req.System != "" {
		sys := anthropic.TextBlockParam{Text: req.System}
		if req.CacheSystem {
			sys.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		system = []anthropic.TextBlockParam{sys}
	}
	if req.SystemContext != "" {
		// After the breakpoint: it changes without breaking the cached prefix.
		system = append(system, anthropic.TextBlockParam{Text: req.SystemContext})
	}
	return system
}

// anthropicTools is the request's tool definitions.
func anthropicTools(req Request) ([]anthropic.ToolUnionParam, error) {
	var out []anthropic.ToolUnionParam
	for i, t := range req.Tools {
		schema, err := schemaObject(t)
		if err != nil {
			return out, err
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: inputSchema(schema)}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		if req.CacheSystem && req.System == "" && i == len(req.Tools)-1 {
			// Tools come first in Anthropic's prefix order (tools, system,
			// messages); the system block's breakpoint covers them, and
			// without a system prompt a breakpoint on the last tool does.
			tool.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return out, nil
}

// addBlocks appends blocks of role to msgs. Consecutive messages of one
// role are merged: the API wants user and assistant turns to alternate,
// and all results of one assistant turn's tool calls in the next user
// message.
func addBlocks(msgs []anthropic.MessageParam, role anthropic.MessageParamRole, blocks ...anthropic.ContentBlockParamUnion) []anthropic.MessageParam {
	if len(blocks) == 0 {
		return msgs
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, anthropic.MessageParam{Role: role, Content: blocks})
}

// anthropicMessages translates the conversation, and says where each of
// its messages ended: lastBlock[i] is message i's last block's message and
// block index in the result ({-1, -1}: nothing before it).
func anthropicMessages(msgs []Message) ([]anthropic.MessageParam, [][2]int, error) {
	var out []anthropic.MessageParam
	lastBlock := make([][2]int, len(msgs))
	end := func() [2]int {
		if n := len(out); n > 0 {
			return [2]int{n - 1, len(out[n-1].Content) - 1}
		}
		return [2]int{-1, -1}
	}
	for i, m := range msgs {
		if i > 0 {
			lastBlock[i-1] = end()
		}
		role, blocks, err := anthropicBlocks(i, m)
		if err != nil {
			return out, lastBlock, err
		}
		out = addBlocks(out, role, blocks...)
	}
	if n := len(msgs); n > 0 {
		lastBlock[n-1] = end()
	}
	return out, lastBlock, nil
}

// anthropicBlocks is message i's role and content blocks: a user's text
// and images, an assistant's text and tool calls, a tool result (sent as
// the user's) with its images.
func anthropicBlocks(i int, m Message) (anthropic.MessageParamRole, []anthropic.ContentBlockParamUnion, error) {
	var blocks []anthropic.ContentBlockParamUnion
	switch m.Role {
	case RoleUser:
		if m.Content != "" { // empty text blocks are refused
			blocks = append(blocks, anthropic.NewTextBlock(m.Content))
		}
		for _, im := range m.Images {
			blocks = append(blocks, anthropic.NewImageBlockBase64(im.MIMEType, base64.StdEncoding.EncodeToString(im.Data)))
		}
		return anthropic.MessageParamRoleUser, blocks, nil
	case RoleAssistant:
		if m.Content != "" {
			blocks = append(blocks, anthropic.NewTextBlock(m.Content))
		}
		for _, tc := range m.ToolCalls {
			args, ok := toolArguments(tc.Arguments)
			if !ok {
				return "", nil, services.Errorf(services.EINVALID, "message %d: tool call %q has arguments that are not a JSON object", i, tc.Name)
			}
			blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, json.RawMessage(args), tc.Name))
		}
		return anthropic.MessageParamRoleAssistant, blocks, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return "", nil, services.Errorf(services.EINVALID, "message %d: tool message without ToolCallID", i)
		}
		result := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
		if m.IsError {
			result.IsError = anthropic.Bool(true)
		}
		if m.Content != "" {
			result.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}}
		}
		for _, im := range m.Images {
			result.Content = append(result.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{
				Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
					Data: base64.StdEncoding.EncodeToString(im.Data), MediaType: anthropic.Base64ImageSourceMediaType(im.MIMEType)}}}})
		}
		return anthropic.MessageParamRoleUser, []anthropic.ContentBlockParamUnion{{OfToolResult: &result}}, nil
	default:
		return "", nil, services.Errorf(services.EINVALID, "message %d: unknown role %q", i, m.Role)
	}
}

// maxCachePoints is the Messages API's limit of cache_control blocks.
const maxCachePoints = 4

// markCachePoints puts cache_control breakpoints on the ends of the
// messages req.CacheAt names and on the last message, within the API's
// limit of four (the system block or last tool holds one; the oldest
// message marks are dropped first). A turn's request then reads the prefix
// the previous turn's request wrote (the end of the history it sent) and
// writes its own for the next model call and the next turn.
func markCachePoints(params *anthropic.MessageNewParams, req Request, lastBlock [][2]int) {
	used := 0
	if len(params.System) > 0 || len(params.Tools) > 0 {
		used = 1
	}
	points := append([]int(nil), req.CacheAt...)
	if n := len(req.Messages); n > 0 && (len(points) == 0 || points[len(points)-1] != n-1) {
		points = append(points, n-1)
	}
	if extra := len(points) - (maxCachePoints - used); extra > 0 {
		points = points[extra:]
	}
	for _, i := range points {
		if i < 0 || i >= len(lastBlock) || lastBlock[i][0] < 0 {
			continue
		}
		setCacheControl(&params.Messages[lastBlock[i][0]].Content[lastBlock[i][1]])
	}
}

// setCacheControl puts a cache breakpoint on b.
func setCacheControl(b *anthropic.ContentBlockParamUnion) {
	cc := anthropic.NewCacheControlEphemeralParam()
	switch {
	case b.OfText != nil:
		b.OfText.CacheControl = cc
	case b.OfImage != nil:
		b.OfImage.CacheControl = cc
	case b.OfToolUse != nil:
		b.OfToolUse.CacheControl = cc
	case b.OfToolResult != nil:
		b.OfToolResult.CacheControl = cc
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

// inputSchema spreads a decoded JSON Schema over the SDK's schema type.
func inputSchema(schema map[string]any) anthropic.ToolInputSchemaParam {
	s := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range schema {
		switch k {
		case "type":
			// always "object"
		case "properties":
			s.Properties = v
		case "required":
			if list, ok := v.([]any); ok {
				for _, r := range list {
					if name, ok := r.(string); ok {
						s.Required = append(s.Required, name)
					}
				}
			}
		default:
			s.ExtraFields[k] = v
		}
	}
	return s
}

// response translates a (possibly accumulated) message into a Response.
// inputs holds streamed tool inputs by content block index.
func (p *Anthropic) response(msg *anthropic.Message, inputs map[int64]*strings.Builder) (*Response, error) {
	resp := &Response{
		Model: string(msg.Model),
		Usage: services.TokenUsage{
			PromptTokens:     int(msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens),
			CompletionTokens: int(msg.Usage.OutputTokens),
			CachedTokens:     int(msg.Usage.CacheReadInputTokens),
			CacheWriteTokens: int(msg.Usage.CacheCreationInputTokens),
		},
	}
	if resp.Model == "" {
		resp.Model = p.model
	}
	var text strings.Builder
	for i, block := range msg.Content {
		switch block.Type {
		case "text":
			text.WriteString(block.Text)
		case "tool_use":
			raw := []byte(block.Input)
			if b := inputs[int64(i)]; b != nil && b.Len() > 0 {
				raw = []byte(b.String())
			}
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

// failure classifies an SDK error.
func (p *Anthropic) failure(ctx context.Context, err error) error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		var body struct {
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
		if apiErr.StatusCode == 0 || apiErr.StatusCode == 200 {
			// An error event inside a stream (overloaded_error, api_error).
			return providerFailure(ctx, ProviderAnthropic, p.model,
				fmt.Errorf("%w: %s %s", errStreamFailed, body.Error.Type, body.Error.Message), nil)
		}
		info := &statusInfo{status: apiErr.StatusCode, message: body.Error.Message}
		if apiErr.Response != nil {
			info.header = apiErr.Response.Header
		}
		return providerFailure(ctx, ProviderAnthropic, p.model, err, info)
	}
	if strings.HasPrefix(err.Error(), "received error while streaming") {
		err = fmt.Errorf("%w: %v", errStreamFailed, err)
	}
	return providerFailure(ctx, ProviderAnthropic, p.model, err, nil)
}
