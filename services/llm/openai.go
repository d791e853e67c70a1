package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/switchboard/switchboard/services"
)

// DefaultOpenAIBaseURL is used when Config.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// OpenAI is a Provider speaking the OpenAI chat completions API, which most
// model servers also speak (Ollama, vLLM, llama.cpp, DeepSeek, OpenRouter).
// It makes one attempt per call; wrap it with Retry (New does).
type OpenAI struct {
	completions openai.ChatCompletionService
	model       string
	baseURL     string
	window      int
	// maxCompletionTokens sends max_completion_tokens, which OpenAI's own
	// reasoning models require; other servers get the widely supported
	// max_tokens.
	maxCompletionTokens bool
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI-compatible provider for cfg after applying the
// same defaults and validation as New; the error is an EINVALID
// *services.Error naming the offending environment variable.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	cfg.Provider = ProviderOpenAI
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return newOpenAI(cfg), nil
}

func newOpenAI(cfg Config) *OpenAI {
	// The service is built without openai.NewClient so that OPENAI_API_KEY and
	// OPENAI_BASE_URL from the environment never leak into a request meant
	// for another server: only LLM_* configures the provider.
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.httpClient()),
		option.WithMaxRetries(0), // Retry is the only retry layer
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	u, _ := url.Parse(cfg.BaseURL)
	return &OpenAI{
		completions:         openai.NewChatCompletionService(opts...),
		model:               cfg.Model,
		baseURL:             cfg.BaseURL,
		window:              cfg.ContextWindow,
		maxCompletionTokens: u != nil && u.Host == "api.openai.com",
	}
}

// Name returns "openai".
func (p *OpenAI) Name() string { return ProviderOpenAI }

// Model returns the configured model.
func (p *OpenAI) Model() string { return p.model }

// ContextWindow returns the configured context window in tokens.
func (p *OpenAI) ContextWindow() int { return p.window }

// BaseURL returns the server address requests go to.
func (p *OpenAI) BaseURL() string { return p.baseURL }

// Complete implements Provider with one chat completions request, streamed
// when onDelta is non-nil. Errors are as documented on Provider.
func (p *OpenAI) Complete(ctx context.Context, req Request, onDelta func(string)) (*Response, error) {
	r, err := p.request(req)
	if err != nil {
		return nil, err
	}
	if onDelta != nil {
		r.params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	params, opts, err := r.options()
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		cc, err := p.completions.New(ctx, params, opts...)
		if err != nil {
			return nil, p.failure(ctx, err)
		}
		return p.response(cc)
	}

	stream := p.completions.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	finished := false
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			return nil, p.failure(ctx, fmt.Errorf("%w: chunk %q could not be accumulated", errStreamFailed, truncate(chunk.RawJSON(), 200)))
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != "" {
				onDelta(c.Delta.Content)
			}
			if c.FinishReason != "" {
				finished = true
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.failure(ctx, err)
	}
	// A connection closed cleanly before the last chunk looks like a normal
	// end of stream; only the missing finish_reason tells it apart.
	if !finished {
		return nil, p.failure(ctx, errStreamTruncated)
	}
	return p.response(&acc.ChatCompletion)
}

// request translates a Request into chat completion parameters.
func (p *OpenAI) request(req Request) (*openAIRequest, error) {
	r := &openAIRequest{params: openai.ChatCompletionNewParams{Model: shared.ChatModel(p.model)}, splice: splicing()}
	params := &r.params
	if sys := joinSystem(req.System, req.SystemContext); sys != "" {
		_ = r.message(newKeyer("system").str(sys).key(), true, func() (openai.ChatCompletionMessageParamUnion, error) {
			return openai.SystemMessage(sys), nil
		})
	}
	var images []services.Image // of the tool messages since the last other message
	flushImages := func() {
		if len(images) == 0 {
			return
		}
		parts := []openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("Images returned by the tool calls above:")}
		for _, im := range images {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(im)}))
		}
		_ = r.message(encodedKey{}, false, func() (openai.ChatCompletionMessageParamUnion, error) { return openai.UserMessage(parts), nil })
		images = nil
	}
	for i, m := range req.Messages {
		if m.Role != RoleTool {
			flushImages()
		}
		k, keep := messageKey(m)
		if err := r.message(k, keep, func() (openai.ChatCompletionMessageParamUnion, error) { return openAIMessage(i, m) }); err != nil {
			return nil, err
		}
		if m.Role == RoleTool {
			images = append(images, m.Images...)
		}
	}
	flushImages()
	for _, t := range req.Tools {
		err := r.tool(t.Name, t.Description, t.Parameters, func() (openai.ChatCompletionToolUnionParam, error) {
			schema, err := schemaObject(t)
			if err != nil {
				return openai.ChatCompletionToolUnionParam{}, err
			}
			def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
			if t.Description != "" {
				def.Description = openai.String(t.Description)
			}
			return openai.ChatCompletionFunctionTool(def), nil
		})
		if err != nil {
			return nil, err
		}
	}
	if req.MaxTokens > 0 {
		if p.maxCompletionTokens {
			params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		} else {
			params.MaxTokens = openai.Int(int64(req.MaxTokens))
		}
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if len(req.Stop) > 0 {
		params.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: req.Stop}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case services.ResponseJSONObject:
			params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		case services.ResponseJSONSchema:
			var schema map[string]any
			if err := json.Unmarshal(rf.Schema, &schema); err != nil {
				return nil, services.Errorf(services.EINVALID, "response_format: the JSON schema is not a JSON object: %v", err)
			}
			js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: rf.Name, Schema: schema}
			if rf.Description != "" {
				js.Description = openai.String(rf.Description)
			}
			if rf.Strict {
				js.Strict = openai.Bool(true)
			}
			params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
		}
	}
	return r, nil
}

// openAIMessage is message i of a request as chat completions parameters
// (a tool message's images are sent by the caller, after the results).
func openAIMessage(i int, m Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case RoleUser:
		if len(m.Images) == 0 {
			return openai.UserMessage(m.Content), nil
		}
		var parts []openai.ChatCompletionContentPartUnionParam
		if m.Content != "" {
			parts = append(parts, openai.TextContentPart(m.Content))
		}
		for _, im := range m.Images {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(im)}))
		}
		return openai.UserMessage(parts), nil
	case RoleAssistant:
		a := openai.ChatCompletionAssistantMessageParam{}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = openai.String(m.Content)
		}
		for _, tc := range m.ToolCalls {
			args, ok := toolArguments(tc.Arguments)
			if !ok {
				return openai.ChatCompletionMessageParamUnion{}, services.Errorf(services.EINVALID, "message %d: tool call %q has arguments that are not a JSON object", i, tc.Name)
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name: tc.Name, Arguments: string(args),
					},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, services.Errorf(services.EINVALID, "message %d: tool message without ToolCallID", i)
		}
		content := m.Content
		if m.IsError {
			// Chat completions has no error flag on tool results.
			content = "Error: " + content
		}
		return openai.ToolMessage(content, m.ToolCallID), nil
	}
	return openai.ChatCompletionMessageParamUnion{}, services.Errorf(services.EINVALID, "message %d: unknown role %q", i, m.Role)
}

// response translates a (possibly accumulated) completion into a Response.
func (p *OpenAI) response(cc *openai.ChatCompletion) (*Response, error) {
	if len(cc.Choices) == 0 {
		return nil, p.failure(context.Background(), fmt.Errorf("%w: the reply has no choices", errBadReply))
	}
	choice := cc.Choices[0]
	resp := &Response{
		Text:  choice.Message.Content,
		Model: cc.Model,
		Usage: services.TokenUsage{
			PromptTokens:     int(cc.Usage.PromptTokens),
			CompletionTokens: int(cc.Usage.CompletionTokens),
			CachedTokens:     int(cc.Usage.PromptTokensDetails.CachedTokens),
		},
	}
	if resp.Model == "" {
		resp.Model = p.model
	}
	for i, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		id := tc.ID
		if id == "" {
			// Some compatible servers omit ids; the tool message needs one.
			id = fmt.Sprintf("call_%d", i)
		}
		resp.ToolCalls = append(resp.ToolCalls, toolCall(id, tc.Function.Name, []byte(tc.Function.Arguments)))
	}
	switch choice.FinishReason {
	case "stop":
		resp.StopReason = StopEnd
	case "tool_calls", "function_call":
		resp.StopReason = StopToolCalls
	case "length":
		resp.StopReason = StopMaxTokens
	default:
		resp.StopReason = StopOther
	}
	if len(resp.ToolCalls) > 0 && resp.StopReason == StopEnd {
		resp.StopReason = StopToolCalls // servers that say "stop" after tool calls
	}
	return resp, nil
}

// failure classifies an SDK error.
func (p *OpenAI) failure(ctx context.Context, err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		info := &statusInfo{status: apiErr.StatusCode, message: apiErr.Message}
		if apiErr.Response != nil {
			info.header = apiErr.Response.Header
		}
		return providerFailure(ctx, ProviderOpenAI, p.model, err, info)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		err = fmt.Errorf("%w: %s", errStreamFailed, se.Message)
	}
	return providerFailure(ctx, ProviderOpenAI, p.model, err, nil)
}

// schemaObject decodes a tool's JSON Schema, defaulting to an empty object.
func schemaObject(t services.ToolSpec) (map[string]any, error) {
	if len(strings.TrimSpace(string(t.Parameters))) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return nil, services.Errorf(services.EINVALID, "tool %q: JSON schema is not a JSON object: %v", t.Name, err)
	}
	return schema, nil
}

// dataURL is an image inline, as OpenAI's image_url parts take it.
func dataURL(im services.Image) string {
	return "data:" + im.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

// joinSystem is the one system message of an OpenAI-compatible request: the
// stable prefix first, so the bytes servers cache stay the same.
func joinSystem(system, context string) string {
	switch {
	case context == "":
		return system
	case system == "":
		return context
	}
	return system + "\n\n" + context
}
