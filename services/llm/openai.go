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
	"net/url"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// DefaultOpenAIBaseURL is used when Config.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// OpenAI is a Provider speaking the OpenAI chat completions API, which most
// model servers also speak (Ollama, vLLM, llama.cpp, DeepSeek, OpenRouter).
// It makes one attempt per call; wrap it with Retry (New does).
type OpenAI struct {
	client  *http.Client
	apiKey  string
	model   string
	baseURL string
	window  int
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

// newOpenAI is the provider for a normalized cfg. Only LLM_* configures it:
// OPENAI_API_KEY and OPENAI_BASE_URL from the environment are never read.
func newOpenAI(cfg Config) *OpenAI {
	u, _ := url.Parse(cfg.BaseURL)
	return &OpenAI{
		client:              cfg.httpClient(),
		apiKey:              cfg.APIKey,
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
	r, err := p.request(req, onDelta != nil)
	if err != nil {
		return nil, err
	}
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	if onDelta != nil {
		header.Set("Accept", "text/event-stream")
	} else {
		header.Set("Accept", "application/json")
	}
	if p.apiKey != "" {
		header.Set("Authorization", "Bearer "+p.apiKey)
	}
	resp, err := post(ctx, p.client, strings.TrimRight(p.baseURL, "/")+"/chat/completions", header, body)
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	if onDelta == nil {
		var cc openAICompletion
		if err := readJSON(resp, &cc); err != nil {
			return nil, p.failure(ctx, err)
		}
		return p.response(&cc)
	}
	defer resp.Body.Close()
	cc, err := p.stream(resp.Body, onDelta)
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	return p.response(cc)
}

// openAICompletion is the part of a chat completion (or of a streamed
// chunk, whose choices hold deltas) that is read.
type openAICompletion struct {
	Model   string         `json:"model"`
	Choices []openAIChoice `json:"choices"`
	Usage   *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

type openAIChoice struct {
	Index        int            `json:"index"`
	Message      openAIReplyMsg `json:"message"`
	Delta        openAIReplyMsg `json:"delta"`
	FinishReason string         `json:"finish_reason"`
}

type openAIReplyMsg struct {
	Content   string `json:"content"`
	ToolCalls []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// stream reads a streamed reply, passing choice 0's text to onDelta, into
// the completion it adds up to: text, tool calls gathered by their index
// (the id and name from the first chunk that has them, the arguments
// joined), the finish reason and the usage of the last chunk.
func (p *OpenAI) stream(body io.Reader, onDelta func(string)) (*openAICompletion, error) {
	acc := openAICompletion{Choices: make([]openAIChoice, 1)}
	msg := &acc.Choices[0].Message
	var text strings.Builder
	finished := false
	sse := newSSEReader(body)
	for {
		ev, ok := sse.next()
		if !ok {
			break
		}
		if bytes.HasPrefix(ev.data, []byte("[DONE]")) {
			break
		}
		if e := gjsonError(ev.data); e != "" {
			return nil, fmt.Errorf("%w: received error while streaming: %s", errStreamFailed, e)
		}
		var chunk openAICompletion
		if err := json.Unmarshal(ev.data, &chunk); err != nil {
			return nil, fmt.Errorf("%w: chunk %q could not be accumulated: %v", errBadReply, truncate(string(ev.data), 200), err)
		}
		if chunk.Model != "" {
			acc.Model = chunk.Model
		}
		if chunk.Usage != nil {
			acc.Usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != "" {
				text.WriteString(c.Delta.Content)
				onDelta(c.Delta.Content)
			}
			for j, tc := range c.Delta.ToolCalls {
				i := j
				if tc.Index != nil {
					i = *tc.Index
				}
				if i < 0 || i > len(msg.ToolCalls) {
					return nil, fmt.Errorf("%w: chunk %q could not be accumulated: tool call index %d", errBadReply, truncate(string(ev.data), 200), i)
				}
				if i == len(msg.ToolCalls) {
					msg.ToolCalls = append(msg.ToolCalls, tc)
					msg.ToolCalls[i].Function.Arguments = ""
				}
				t := &msg.ToolCalls[i]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				if tc.Type != "" {
					t.Type = tc.Type
				}
				if tc.Function.Name != "" {
					t.Function.Name = tc.Function.Name
				}
				t.Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != "" {
				acc.Choices[0].FinishReason = c.FinishReason
				finished = true
			}
		}
	}
	if sse.err != nil {
		return nil, sse.err
	}
	// A connection closed cleanly before the last chunk looks like a normal
	// end of stream; only the missing finish_reason tells it apart.
	if !finished {
		return nil, errStreamTruncated
	}
	msg.Content = text.String()
	return &acc, nil
}

// gjsonError is the "error" member of a streamed event, as JSON text ("" for
// none): a server that fails mid-stream sends {"error":{…}}.
func gjsonError(data []byte) string {
	if !bytes.Contains(data, []byte(`"error"`)) {
		return ""
	}
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &v) != nil || len(v.Error) == 0 || string(v.Error) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v.Error, &s) == nil {
		return s
	}
	return string(v.Error)
}

// request translates a Request into a chat completions request.
func (p *OpenAI) request(req Request, stream bool) (*openAIRequest, error) {
	r := &openAIRequest{head: openAIHead{Model: p.model}, splice: splicing(), stream: stream}
	head := &r.head
	if stream {
		head.StreamOptions = &openAIStreamOptions{IncludeUsage: true}
	}
	if sys := joinSystem(req.System, req.SystemContext); sys != "" {
		_ = r.message(newKeyer("system").str(sys).key(), true, func() (any, error) {
			return openAIText{Content: sys, Role: "system"}, nil
		})
	}
	var images []services.Image // of the tool messages since the last other message
	flushImages := func() {
		if len(images) == 0 {
			return
		}
		parts := []any{openAITextPart{Text: "Images returned by the tool calls above:", Type: "text"}}
		for _, im := range images {
			parts = append(parts, imagePart(im))
		}
		_ = r.message(encodedKey{}, false, func() (any, error) { return openAIParts{Content: parts, Role: "user"}, nil })
		images = nil
	}
	for i, m := range req.Messages {
		if m.Role != RoleTool {
			flushImages()
		}
		k, keep := messageKey(m)
		if err := r.message(k, keep, func() (any, error) { return openAIMessage(i, m) }); err != nil {
			return nil, err
		}
		if m.Role == RoleTool {
			images = append(images, m.Images...)
		}
	}
	flushImages()
	for _, t := range req.Tools {
		err := r.tool(t.Name, t.Description, t.Parameters, func() (any, error) {
			schema, err := schemaObject(t)
			if err != nil {
				return nil, err
			}
			return openAITool{Function: openAIFunction{Name: t.Name, Description: t.Description, Parameters: schema}, Type: "function"}, nil
		})
		if err != nil {
			return nil, err
		}
	}
	if req.MaxTokens > 0 {
		n := req.MaxTokens
		if p.maxCompletionTokens {
			head.MaxCompletionTokens = &n
		} else {
			head.MaxTokens = &n
		}
	}
	head.Temperature = req.Temperature
	if len(req.Stop) > 0 {
		head.Stop = req.Stop
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case services.ResponseJSONObject:
			head.ResponseFormat = &openAIResponseFormat{Type: "json_object"}
		case services.ResponseJSONSchema:
			var schema map[string]any
			if err := json.Unmarshal(rf.Schema, &schema); err != nil {
				return nil, services.Errorf(services.EINVALID, "response_format: the JSON schema is not a JSON object: %v", err)
			}
			head.ResponseFormat = &openAIResponseFormat{Type: "json_schema",
				JSONSchema: &openAIJSONSchema{Name: rf.Name, Strict: rf.Strict, Description: rf.Description, Schema: schema}}
		}
	}
	return r, nil
}

// The request's JSON, field for field in the order OpenAI's SDK wrote it
// (the bytes servers cache stay those of earlier releases).
type (
	openAIHead struct {
		Model               string                `json:"model,omitempty"`
		MaxCompletionTokens *int                  `json:"max_completion_tokens,omitempty"`
		MaxTokens           *int                  `json:"max_tokens,omitempty"`
		Temperature         *float64              `json:"temperature,omitempty"`
		Stop                []string              `json:"stop,omitempty"`
		StreamOptions       *openAIStreamOptions  `json:"stream_options,omitempty"`
		ResponseFormat      *openAIResponseFormat `json:"response_format,omitempty"`
	}
	openAIStreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	openAIResponseFormat struct {
		JSONSchema *openAIJSONSchema `json:"json_schema,omitempty"`
		Type       string            `json:"type"`
	}
	openAIJSONSchema struct {
		Name        string         `json:"name"`
		Strict      bool           `json:"strict,omitempty"`
		Description string         `json:"description,omitempty"`
		Schema      map[string]any `json:"schema,omitempty"`
	}
	openAIText struct {
		Content string `json:"content"`
		Role    string `json:"role"`
	}
	openAIParts struct {
		Content []any  `json:"content"`
		Role    string `json:"role"`
	}
	openAITextPart struct {
		Text string `json:"text"`
		Type string `json:"type"`
	}
	openAIImagePart struct {
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
		Type string `json:"type"`
	}
	openAIAssistant struct {
		Content   *string          `json:"content,omitempty"`
		ToolCalls []openAIToolCall `json:"tool_calls,omitempty"`
		Role      string           `json:"role"`
	}
	openAIToolCall struct {
		ID       string `json:"id"`
		Function struct {
			Arguments string `json:"arguments"`
			Name      string `json:"name"`
		} `json:"function"`
		Type string `json:"type"`
	}
	openAIToolResult struct {
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		Role       string `json:"role"`
	}
	openAITool struct {
		Function openAIFunction `json:"function"`
		Type     string         `json:"type"`
	}
	openAIFunction struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters,omitempty"`
	}
)

func imagePart(im services.Image) openAIImagePart {
	part := openAIImagePart{Type: "image_url"}
	part.ImageURL.URL = dataURL(im)
	return part
}

// openAIMessage is message i of a request as a chat completions message
// (a tool message's images are sent by the caller, after the results).
func openAIMessage(i int, m Message) (any, error) {
	switch m.Role {
	case RoleUser:
		if len(m.Images) == 0 {
			return openAIText{Content: m.Content, Role: "user"}, nil
		}
		var parts []any
		if m.Content != "" {
			parts = append(parts, openAITextPart{Text: m.Content, Type: "text"})
		}
		for _, im := range m.Images {
			parts = append(parts, imagePart(im))
		}
		return openAIParts{Content: parts, Role: "user"}, nil
	case RoleAssistant:
		a := openAIAssistant{Role: "assistant"}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			content := m.Content
			a.Content = &content
		}
		for _, tc := range m.ToolCalls {
			args, ok := toolArguments(tc.Arguments)
			if !ok {
				return nil, services.Errorf(services.EINVALID, "message %d: tool call %q has arguments that are not a JSON object", i, tc.Name)
			}
			call := openAIToolCall{ID: tc.ID, Type: "function"}
			call.Function.Name, call.Function.Arguments = tc.Name, string(args)
			a.ToolCalls = append(a.ToolCalls, call)
		}
		return a, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return nil, services.Errorf(services.EINVALID, "message %d: tool message without ToolCallID", i)
		}
		content := m.Content
		if m.IsError {
			// Chat completions has no error flag on tool results.
			content = "Error: " + content
		}
		return openAIToolResult{Content: content, ToolCallID: m.ToolCallID, Role: "tool"}, nil
	}
	return nil, services.Errorf(services.EINVALID, "message %d: unknown role %q", i, m.Role)
}

// response translates a (possibly accumulated) completion into a Response.
func (p *OpenAI) response(cc *openAICompletion) (*Response, error) {
	if len(cc.Choices) == 0 {
		return nil, p.failure(context.Background(), fmt.Errorf("%w: the reply has no choices", errBadReply))
	}
	choice := cc.Choices[0]
	resp := &Response{
		Text:  choice.Message.Content,
		Model: cc.Model,
	}
	if u := cc.Usage; u != nil {
		resp.Usage = services.TokenUsage{
			PromptTokens:     u.PromptTokens,
			CompletionTokens: u.CompletionTokens,
			CachedTokens:     u.PromptTokensDetails.CachedTokens,
		}
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

// failure classifies a failed call.
func (p *OpenAI) failure(ctx context.Context, err error) error {
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		info := &statusInfo{status: apiErr.status, header: apiErr.header, message: parseErrorBody(apiErr.body).Message}
		return providerFailure(ctx, ProviderOpenAI, p.model, err, info)
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
