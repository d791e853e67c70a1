package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// The request side of POST /v1/chat/completions: which fields are honoured,
// which are accepted only at their neutral value, which are refused, and
// how messages become the one inbound message of the turn.

// BodyLimit bounds a /v1 request body (images travel inline as data
// URLs, so it is larger than the rest of the API's).
const BodyLimit = 4 << 20

// bodyLimitText names BodyLimit in refusals.
const bodyLimitText = "4 MiB"

// maxImages bounds the images of one request.
const maxImages = 8

// badParam is a 400 about one parameter.
func badParam(param, code, format string, args ...any) *apiFail {
	return &apiFail{status: http.StatusBadRequest, code: code, param: param, msg: fmt.Sprintf(format, args...)}
}

// unsupported refuses a parameter the endpoint does not implement.
func unsupported(param, why string) *apiFail {
	return badParam(param, "unsupported_parameter", "%s is not supported by this endpoint: %s", param, why)
}

// apiRequest is a parsed, validated chat completion request.
type apiRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	User         *string
	// Text is the stored message: the last user message's text.
	Text string
	// Turn is what the turn is asked besides the text (nil: nothing).
	Turn *services.TurnRequest
	// Ignored counts the earlier user and assistant messages, which the
	// server's own history replaces.
	Ignored int
	// schema validates a json_schema answer (nil: none).
	schema *jsonschema.Resolved
}

// honoured are the fields the endpoint reads; neutral the ones it accepts
// only at the value that changes nothing (absent and null are always
// accepted). Anything else is refused by name.
var (
	honouredFields = map[string]bool{
		"model": true, "messages": true, "stream": true, "stream_options": true, "user": true,
		"max_tokens": true, "max_completion_tokens": true, "temperature": true, "stop": true,
		"response_format": true, "n": true, "logprobs": true,
	}
	neutralFields = map[string]string{
		"top_p": "1", "frequency_penalty": "0", "presence_penalty": "0", "logit_bias": "{}",
		"store": "false", "parallel_tool_calls": "true or false (there are no client tools)",
		"seed":     "any (answers are not reproducible; it is ignored)",
		"metadata": "any (it is ignored)", "service_tier": `"auto" or "default"`,
		"modalities": `["text"]`,
	}
	refusedFields = map[string]string{
		"tools":              "the agent uses its own tools; client-side tools (function calling) are not available",
		"tool_choice":        "the agent uses its own tools; client-side tools (function calling) are not available",
		"functions":          "the agent uses its own tools; client-side functions are not available",
		"function_call":      "the agent uses its own tools; client-side functions are not available",
		"top_logprobs":       "log probabilities are not available",
		"audio":              "audio output is not available",
		"prediction":         "predicted outputs are not available",
		"web_search_options": "the agent searches with its own tools",
		"reasoning_effort":   "the model's settings are the server's",
		"verbosity":          "the model's settings are the server's",
		"prompt_cache_key":   "the server manages prompt caching",
		"safety_identifier":  "use `user` to pick a conversation",
	}
)

// neutral reports whether raw is field's neutral value.
func neutral(field string, raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch field {
	case "top_p":
		return v == float64(1)
	case "frequency_penalty", "presence_penalty":
		return v == float64(0)
	case "logit_bias":
		m, ok := v.(map[string]any)
		return ok && len(m) == 0
	case "store":
		return v == false
	case "parallel_tool_calls":
		_, ok := v.(bool)
		return ok
	case "seed", "metadata":
		return true
	case "service_tier":
		return v == "auto" || v == "default"
	case "modalities":
		l, ok := v.([]any)
		return ok && len(l) == 1 && l[0] == "text"
	}
	return false
}

// readBody reads the body within BodyLimit.
func readBody(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return nil, badParam("", "invalid_content_type", "Content-Type must be application/json, got %q", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		var he *echo.HTTPError
		if errors.As(err, &tooBig) || (errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge) {
			return nil, tooLarge()
		}
		return nil, badParam("", "invalid_body", "reading the request body: %v", err)
	}
	return body, nil
}

// tooLarge is the refusal of a body over BodyLimit.
func tooLarge() *apiFail {
	return &apiFail{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
		msg: "request body is over the limit of " + bodyLimitText + " (" + strconv.Itoa(BodyLimit) + " bytes); send smaller images or less text"}
}

// parseChatRequest decodes and validates a request. readsImages says
// whether the model reads images (image parts are refused otherwise);
// maxInstruction bounds the joined system messages in bytes.
func parseChatRequest(body []byte, readsImages bool, maxInstruction int) (apiRequest, error) {
	var out apiRequest
	req, err := decodeRequest(body)
	if err != nil {
		return out, err
	}
	if req.Model == "" {
		return out, badParam("model", "missing_required_parameter", "model is required (use %q)", ModelID)
	}
	out.Model, out.Stream, out.User = req.Model, req.Stream, req.User
	if req.StreamOptions != nil {
		if !req.Stream {
			return out, badParam("stream_options", "invalid_value", "stream_options is only allowed with stream: true")
		}
		out.IncludeUsage = req.StreamOptions.IncludeUsage
	}
	if req.N != nil && *req.N != 1 {
		return out, unsupported("n", fmt.Sprintf("only one choice (n: 1) is answered, got n: %d", *req.N))
	}
	if req.Logprobs != nil && *req.Logprobs {
		return out, unsupported("logprobs", "log probabilities are not available (logprobs: false only)")
	}
	turn, schema, err := parseSettings(req)
	if err != nil {
		return out, err
	}
	out.schema = schema
	if err := parseMessages(&out, turn, req.Messages, readsImages); err != nil {
		return out, err
	}
	if maxInstruction > 0 && len(turn.Instruction) > maxInstruction {
		return out, badParam("messages", "invalid_value", "the system messages are %d bytes; at most %d are accepted as the request's instruction",
			len(turn.Instruction), maxInstruction)
	}
	if turn.Instruction != "" || turn.MaxTokens > 0 || turn.Temperature != nil || len(turn.Stop) > 0 ||
		turn.ResponseFormat != nil || len(turn.Images) > 0 {
		out.Turn = turn
	}
	return out, nil
}

// chatRequest is a request's body as decoded, every field checked by name
// first (checkFields).
type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []messageInput `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User                *string         `json:"user"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	Stop                json.RawMessage `json:"stop"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	N                   *int            `json:"n"`
	Logprobs            *bool           `json:"logprobs"`
}

// decodeRequest decodes a body: valid UTF-8, a JSON object whose every
// field is known (checkFields), each of its type, model and user valid
// text.
func decodeRequest(body []byte) (chatRequest, error) {
	var req chatRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, badParam("", "invalid_body", "request body is empty; want a JSON object")
	}
	if !utf8.Valid(body) {
		return req, badParam("", "invalid_body", "request body is not valid UTF-8 (at byte %d)", invalidUTF8At(body))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return req, badParam("", "invalid_json", "invalid JSON at byte %d: %v", syn.Offset, err)
		}
		return req, badParam("", "invalid_json", "invalid JSON: want an object: %v", err)
	}
	if err := checkFields(fields); err != nil {
		return req, err
	}
	clean, _ := json.Marshal(fields) // nulls removed: absent
	if err := json.Unmarshal(clean, &req); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return req, badParam(typ.Field, "invalid_type", "field %s: want %s, got JSON %s", typ.Field, jsonKind(typ.Type), typ.Value)
		}
		return req, badParam("", "invalid_json", "invalid JSON: %v", err)
	}
	err := checkText("model", req.Model)
	if err == nil && req.User != nil {
		err = checkText("user", *req.User)
	}
	if err != nil {
		return req, badParam("", "invalid_text", "%s", services.ErrorMessage(err))
	}
	return req, nil
}

// checkFields removes the null fields (absent) and refuses, in the order
// of their names, a field that is unknown, refused, or not at its neutral
// value.
func checkFields(fields map[string]json.RawMessage) error {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		raw := fields[k]
		if string(bytes.TrimSpace(raw)) == "null" {
			delete(fields, k)
			continue
		}
		if honouredFields[k] {
			continue
		}
		if want, ok := neutralFields[k]; ok {
			if !neutral(k, raw) {
				return unsupported(k, "only "+want+" is accepted, got "+truncateJSON(raw))
			}
			continue
		}
		if why, ok := refusedFields[k]; ok {
			return unsupported(k, why)
		}
		return badParam(k, "unknown_parameter", "unrecognized request argument supplied: %s", k)
	}
	return nil
}

// parseSettings reads the turn's settings: max_tokens (the smaller of it
// and max_completion_tokens), temperature, stop and response_format (with
// a json_schema's resolved schema).
func parseSettings(req chatRequest) (*services.TurnRequest, *jsonschema.Resolved, error) {
	turn := &services.TurnRequest{}
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return nil, nil, badParam(f.name, "invalid_value", "%s must be at least 1, got %d", f.name, *f.v)
		}
		if turn.MaxTokens == 0 || *f.v < turn.MaxTokens {
			turn.MaxTokens = *f.v
		}
	}
	if t := req.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, nil, badParam("temperature", "invalid_value", "temperature must be between 0 and 2, got %v", *t)
		}
		turn.Temperature = t
	}
	stop, err := parseStop(req.Stop)
	if err != nil {
		return nil, nil, err
	}
	turn.Stop = stop
	if len(req.ResponseFormat) == 0 {
		return turn, nil, nil
	}
	rf, schema, err := parseResponseFormat(req.ResponseFormat)
	if err != nil {
		return nil, nil, err
	}
	turn.ResponseFormat = rf
	return turn, schema, nil
}

// parseStop reads stop: a string or up to 4 strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, badParam("stop", "invalid_value", "stop must not be an empty string")
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badParam("stop", "invalid_type", "stop must be a string or an array of strings, got %s", truncateJSON(raw))
	}
	if len(list) > 4 {
		return nil, badParam("stop", "invalid_value", "stop takes at most 4 sequences, got %d", len(list))
	}
	for i, s := range list {
		if s == "" {
			return nil, badParam("stop", "invalid_value", "stop[%d] is empty", i)
		}
		if err := checkText("stop["+strconv.Itoa(i)+"]", s); err != nil {
			return nil, badParam("stop", "invalid_text", "%s", services.ErrorMessage(err))
		}
	}
	if len(list) == 0 {
		return nil, nil
	}
	return list, nil
}

// parseResponseFormat reads response_format; a json_schema's schema is
// resolved here, so a bad schema is refused before anything is stored.
func parseResponseFormat(raw json.RawMessage) (*services.ResponseFormat, *jsonschema.Resolved, error) {
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, nil, badParam("response_format", "invalid_type", "response_format must be an object like {\"type\":\"json_object\"}: %v", err)
	}
	switch rf.Type {
	case services.ResponseText:
		return nil, nil, nil
	case services.ResponseJSONObject:
		return &services.ResponseFormat{Type: rf.Type}, nil, nil
	case services.ResponseJSONSchema:
	default:
		return nil, nil, badParam("response_format.type", "invalid_value", "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got %q", rf.Type)
	}
	js := rf.JSONSchema
	if js == nil {
		return nil, nil, badParam("response_format.json_schema", "missing_required_parameter", "response_format.json_schema is required with type \"json_schema\"")
	}
	if js.Name == "" || len(js.Name) > 64 || strings.IndexFunc(js.Name, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return nil, nil, badParam("response_format.json_schema.name", "invalid_value", "response_format.json_schema.name must be 1-64 of a-z, A-Z, 0-9, _ and -, got %q", js.Name)
	}
	out := &services.ResponseFormat{Type: rf.Type, Name: js.Name, Description: js.Description, Strict: js.Strict != nil && *js.Strict}
	if len(js.Schema) == 0 {
		js.Schema = json.RawMessage(`{"type":"object"}`)
	}
	if err := checkText("response_format.json_schema.description", js.Description); err != nil {
		return nil, nil, badParam("response_format.json_schema.description", "invalid_text", "%s", services.ErrorMessage(err))
	}
	var generic any
	if err := json.Unmarshal(js.Schema, &generic); err == nil {
		if err := jsonText(generic, "response_format.json_schema.schema"); err != nil {
			return nil, nil, badParam("response_format.json_schema.schema", "invalid_text", "%s", services.ErrorMessage(err))
		}
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(js.Schema, &schema); err != nil {
		return nil, nil, badParam("response_format.json_schema.schema", "invalid_schema", "response_format.json_schema.schema is not a JSON Schema object: %v", err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, nil, badParam("response_format.json_schema.schema", "invalid_schema", "response_format.json_schema.schema: %v", err)
	}
	out.Schema = js.Schema
	return out, resolved, nil
}

// jsonText checks every key and string of a decoded JSON value like any
// text field (no NUL: the request is stored with its message).
func jsonText(v any, path string) error {
	switch x := v.(type) {
	case string:
		return checkText(path, x)
	case []any:
		for i, e := range x {
			if err := jsonText(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range x {
			if err := checkText(path+" key", k); err != nil {
				return err
			}
			if err := jsonText(e, path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// messageInput is one message of a request: content is a string or an
// array of content parts.
type messageInput struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         string          `json:"name,omitempty"`
	ToolCalls    json.RawMessage `json:"tool_calls,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
	ToolCallID   string          `json:"tool_call_id,omitempty"`
}

// contentPart is one element of an array content.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
}

// parseMessages reads messages: system and developer messages are the
// turn's instruction, the last message (a user message) is the input with
// its images, and earlier user and assistant messages are counted as
// ignored (the server keeps the history). Client tool traffic is refused.
func parseMessages(out *apiRequest, turn *services.TurnRequest, msgs []messageInput, readsImages bool) error {
	if len(msgs) == 0 {
		return badParam("messages", "invalid_value", "messages is empty; want at least one user message")
	}
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			last = i
			break
		}
	}
	if last < 0 {
		return badParam("messages", "invalid_value", "messages has no message with role \"user\"")
	}
	var instructions []string
	for i, m := range msgs {
		at := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case "system", "developer":
			text, _, err := messageContent(at, m.Content, false, false)
			if err != nil {
				return err
			}
			if strings.TrimSpace(text) != "" {
				instructions = append(instructions, strings.TrimSpace(text))
			}
		case "user":
			if i != last {
				out.Ignored++
				continue
			}
			text, images, err := messageContent(at, m.Content, true, readsImages)
			if err != nil {
				return err
			}
			if len(images) > maxImages {
				return badParam(at+".content", "invalid_value", "%s has %d images; at most %d are accepted", at, len(images), maxImages)
			}
			if strings.TrimSpace(text) == "" {
				if len(images) == 0 {
					return badParam(at+".content", "invalid_value", "%s (the last user message) has no text", at)
				}
				text = "(an image)"
				if len(images) > 1 {
					text = "(" + strconv.Itoa(len(images)) + " images)"
				}
			}
			out.Text, turn.Images = text, images
		case "assistant":
			if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" && string(m.ToolCalls) != "[]" {
				return unsupported(at+".tool_calls", "client-side tools are not available")
			}
			if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
				return unsupported(at+".function_call", "client-side functions are not available")
			}
			if i > last {
				return badParam(at, "invalid_value", "%s is an assistant message after the last user message; the last message must be the user's (continuing an answer is not supported)", at)
			}
			out.Ignored++
		case "tool", "function":
			return unsupported(at+".role", fmt.Sprintf("role %q carries a client-side tool's result; client-side tools are not available", m.Role))
		default:
			return badParam(at+".role", "invalid_value", "%s.role must be \"system\", \"developer\", \"user\" or \"assistant\", got %q", at, m.Role)
		}
	}
	turn.Instruction = strings.Join(instructions, "\n\n")
	if err := checkText("messages[].content", turn.Instruction); err != nil {
		return badParam("messages", "invalid_text", "%s", services.ErrorMessage(err))
	}
	return nil
}

// messageContent reads a message's content: a string, or parts of which
// text parts join with newlines and image_url parts (when images: a user
// message) are decoded from their data URLs, or refused when the model
// does not read images.
func messageContent(at string, raw json.RawMessage, images, readsImages bool) (string, []services.Image, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if err := checkText(at+".content", s); err != nil {
			return "", nil, badParam(at+".content", "invalid_text", "%s", services.ErrorMessage(err))
		}
		return s, nil, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, badParam(at+".content", "invalid_type", "%s.content: want a string or an array of content parts", at)
	}
	var texts []string
	var ims []services.Image
	for j, p := range parts {
		pat := at + ".content[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case "text":
			if err := checkText(pat+".text", p.Text); err != nil {
				return "", nil, badParam(pat+".text", "invalid_text", "%s", services.ErrorMessage(err))
			}
			texts = append(texts, p.Text)
		case "image_url":
			if !images {
				return "", nil, badParam(pat, "invalid_value", "%s: image parts are accepted in user messages only", pat)
			}
			if !readsImages {
				return "", nil, badParam(pat, "images_not_supported",
					"%s is an image, but the configured model does not read images (the server's LLM_IMAGES is 0); send text only", pat)
			}
			if p.ImageURL == nil {
				return "", nil, badParam(pat+".image_url", "missing_required_parameter", "%s.image_url is required: {\"url\": \"data:image/png;base64,…\"}", pat)
			}
			im, err := decodeDataURL(pat+".image_url.url", p.ImageURL.URL)
			if err != nil {
				return "", nil, err
			}
			ims = append(ims, im)
		default:
			return "", nil, badParam(pat+".type", "unsupported_content_type",
				"%s.type %q is not supported; use \"text\" or \"image_url\"", pat, p.Type)
		}
	}
	return strings.Join(texts, "\n"), ims, nil
}

// imageTypes are the image formats accepted (OpenAI's vision formats).
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// decodeDataURL reads an inline image: data:image/…;base64,….
func decodeDataURL(param, u string) (services.Image, error) {
	if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		return services.Image{}, badParam(param, "invalid_image_url",
			"%s: the server does not fetch image URLs; send the image inline as a data URL (data:image/png;base64,…)", param)
	}
	rest, ok := strings.CutPrefix(u, "data:")
	meta, data, comma := strings.Cut(rest, ",")
	mime, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !comma || !isBase64 {
		return services.Image{}, badParam(param, "invalid_image_url", "%s must be a base64 data URL (data:image/png;base64,…)", param)
	}
	mime = strings.ToLower(mime)
	if !imageTypes[mime] {
		return services.Image{}, badParam(param, "invalid_image_format", "%s: image type %q is not accepted; use image/png, image/jpeg, image/gif or image/webp", param, mime)
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return services.Image{}, badParam(param, "invalid_image_url", "%s: the base64 data is invalid: %v", param, err)
	}
	if got := http.DetectContentType(b); got != mime {
		return services.Image{}, badParam(param, "invalid_image_format", "%s says %s but the data is %s", param, mime, got)
	}
	return services.Image{MIMEType: mime, Data: b}, nil
}

// truncateJSON shows a value in a refusal.
func truncateJSON(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
