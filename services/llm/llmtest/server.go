// Package llmtest is a fake model server for tests. One httptest server
// speaks both the OpenAI chat completions API (POST /v1/chat/completions) and
// the Anthropic Messages API (POST /v1/messages), streaming and not, so the
// real SDK clients can be exercised end to end. Replies are scripted per test
// with Enqueue; when the queue is empty the server answers with the default
// reply (an echo of the last user message). Every request body is recorded.
// Like OpenAI, the OpenAI endpoint refuses with 400 a request whose
// assistant tool calls are not each answered by a tool message right after.
// A Server is safe for concurrent use.
package llmtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
)

// API names the protocol a request used.
type API string

// The two APIs the server speaks.
const (
	OpenAI    API = "openai"
	Anthropic API = "anthropic"
)

// Usage is the token accounting a Reply reports. PromptTokens counts every
// input token, cached ones included; for Anthropic the server reports
// input_tokens = PromptTokens - CachedTokens - CacheWriteTokens.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
	CacheWriteTokens int
}

// ToolCall is a tool call in a Reply. Arguments is sent verbatim, so a
// malformed JSON string scripts a malformed tool call.
type ToolCall struct {
	ID        string // generated when empty
	Name      string
	Arguments string
}

// Reply is one scripted answer.
type Reply struct {
	// Text is the answer; streamed word by word.
	Text string
	// ToolCalls follow the text.
	ToolCalls []ToolCall
	// Usage is reported as is; zero means estimated from the lengths.
	Usage Usage
	// NoUsage reports no usage at all (OpenAI API: no usage object or
	// usage chunk), as some OpenAI-compatible servers do.
	NoUsage bool
	// StopReason is the provider-native stop reason; empty means derived
	// ("stop"/"tool_calls", "end_turn"/"tool_use").
	StopReason string
	// Status, when non-zero, answers with this HTTP status and an error body
	// in the API's format instead of a reply.
	Status int
	// RetryAfter is the Retry-After header sent with Status.
	RetryAfter string
	// Delay is waited before answering (or until the client gives up).
	Delay time.Duration
	// CutAfter, when positive, closes the connection after that many text
	// fragments of a streamed answer, without the final events. A
	// non-streamed request with CutAfter set gets its connection closed
	// before any response.
	CutAfter int
	// FragmentDelay is waited before each streamed text fragment, so a
	// client can watch the answer grow.
	FragmentDelay time.Duration
	// errMessage replaces the scripted error's message (the server's own
	// refusals).
	errMessage string
}

// Text returns a Reply answering text.
func Text(text string) Reply { return Reply{Text: text} }

// Status returns a Reply failing with the HTTP status and Retry-After header
// (empty for none).
func Status(status int, retryAfter string) Reply {
	return Reply{Status: status, RetryAfter: retryAfter}
}

// Call returns a Reply calling one tool with the given raw JSON arguments.
func Call(name, arguments string) Reply {
	return Reply{ToolCalls: []ToolCall{{Name: name, Arguments: arguments}}}
}

// Request is one request the server received.
type Request struct {
	API    API
	Path   string
	Header http.Header
	// Body is the raw JSON body.
	Body []byte
	// Model and Stream are read from the body.
	Model  string
	Stream bool
	// LastMessage is the text of the last message: a user message, or a
	// tool result when LastIsToolResult.
	LastMessage      string
	LastIsToolResult bool
	// Images are the images the request carries, in order: OpenAI
	// image_url parts with data URLs, Anthropic base64 image blocks (also
	// inside tool results).
	Images []Image
	// LastImages are the image URLs (data URLs) of the last message's
	// image parts (OpenAI image_url parts; Anthropic base64 image blocks as
	// data URLs).
	LastImages []string
	// ResponseFormat is the OpenAI request's response_format (nil: none);
	// Stop its stop sequences.
	ResponseFormat map[string]any
	Stop           []string
	// LastHeader is the line Switchboard's prompts start the current input
	// with ("[Current date and time: … This message came through …]"),
	// split off LastMessage so scripted replies see the owner's words; Body
	// keeps it.
	LastHeader string

	// toolComplaint is OpenAI's complaint about the request's tool
	// messages ("" when valid); includeUsage is stream_options.include_usage.
	// Both are read with the rest, in the one decoding of the body.
	toolComplaint string
	includeUsage  bool
}

// Image is an image a request carried.
type Image struct {
	// Role is the role of the message it came in.
	Role     string
	MIMEType string
	Data     []byte
}

// InputHeaderPrefix starts the line a prompt puts before the current input.
const InputHeaderPrefix = services.InputHeaderPrefix

// JSON decodes the request body into a generic map, failing t on error.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("llmtest: request body is not JSON: %v", err)
	}
	return m
}

// Server is the fake model server.
type Server struct {
	// URL is the server's root, e.g. http://127.0.0.1:41234.
	URL string

	srv *httptest.Server
	ids atomic.Int64

	mu           sync.Mutex
	queue        []Reply
	requests     []Request
	defaultReply func(Request) Reply
	latency      time.Duration
	noLog        bool
	transcribe   func(Transcription) TranscriptReply
	transcripts  []Transcription
	cache        *PromptCache
}

// SetPromptCache makes the server report prompt caching by the provider's
// rules (see PromptCache) for replies that carry no scripted Usage; nil
// turns it off (the default: no cached tokens).
func (s *Server) SetPromptCache(c *PromptCache) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache = c
}

// NewServer starts a server that is closed when t's test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{defaultReply: Echo}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Listen starts a server on addr (e.g. 127.0.0.1:0) outside a test, for
// benchmarks and manual runs; the caller closes it. It keeps no request log.
func Listen(addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{defaultReply: Echo, noLog: true}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

// Close shuts the server down, closing open connections.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// OpenAIBaseURL is the base URL for an OpenAI-compatible client.
func (s *Server) OpenAIBaseURL() string { return s.URL + "/v1" }

// AnthropicBaseURL is the base URL for an Anthropic client.
func (s *Server) AnthropicBaseURL() string { return s.URL }

// Enqueue appends scripted replies; each request takes the next one.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetDefault sets the reply for requests that find the queue empty.
func (s *Server) SetDefault(reply func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaultReply = reply
}

// SetLatency sets a delay added before every answer (0 by default).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestCount returns the number of requests received so far.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Pending returns the number of scripted replies not yet used.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Echo is the default reply: "echo: <last user message>", or
// "tool result: <content>" when the last message is a tool result. Like a
// model that honours response_format, it answers a json_object request
// with {"echo": "<last message>"} and a json_schema request with JSON made
// from the schema (SchemaInstance).
func Echo(r Request) Reply {
	if r.LastIsToolResult {
		return Text("tool result: " + r.LastMessage)
	}
	switch r.ResponseFormat["type"] {
	case "json_object":
		b, _ := json.Marshal(map[string]string{"echo": r.LastMessage})
		return Text(string(b))
	case "json_schema":
		js, _ := r.ResponseFormat["json_schema"].(map[string]any)
		schema, _ := js["schema"].(map[string]any)
		b, _ := json.Marshal(SchemaInstance(schema, r.LastMessage))
		return Text(string(b))
	}
	return Text("echo: " + r.LastMessage)
}

// SchemaInstance is a value valid against a simple JSON Schema: each
// property of an object (required or not), text for a string (the first
// enum value or const when there is one), 1 for a number or integer, true
// for a boolean, one item for an array (minItems more), null for null.
func SchemaInstance(schema map[string]any, text string) any {
	if c, ok := schema["const"]; ok {
		return c
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ := schema["type"]
	if l, ok := typ.([]any); ok && len(l) > 0 {
		typ = l[0]
	}
	if typ == nil {
		if _, ok := schema["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for name, sub := range props {
			sm, _ := sub.(map[string]any)
			out[name] = SchemaInstance(sm, text)
		}
		return out
	case "array":
		items, _ := schema["items"].(map[string]any)
		n := 1
		if m, ok := schema["minItems"].(float64); ok && int(m) > n {
			n = int(m)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = SchemaInstance(items, text)
		}
		return out
	case "integer", "number":
		if m, ok := schema["minimum"].(float64); ok && m > 1 {
			return m
		}
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	}
	return text
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	var api API
	switch r.URL.Path {
	case "/v1/chat/completions":
		api = OpenAI
	case "/v1/messages":
		api = Anthropic
	case "/v1/audio/transcriptions":
		s.handleTranscription(w, r)
		return
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	req := parseRequest(api, r, body)

	s.mu.Lock()
	if !s.noLog {
		s.requests = append(s.requests, req)
	}
	if api == OpenAI {
		if msg := req.toolComplaint; msg != "" {
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil, "param": "messages"}})
			return
		}
	}
	var reply Reply
	scripted := len(s.queue) > 0
	if scripted {
		reply = s.queue[0]
		s.queue = s.queue[1:]
	}
	def, latency, cache := s.defaultReply, s.latency, s.cache
	s.mu.Unlock()
	if !scripted {
		reply = def(req)
	}

	if !sleep(r.Context(), latency+reply.Delay) {
		return
	}
	if reply.Status != 0 {
		writeError(w, api, reply)
		return
	}
	if reply.CutAfter > 0 && !req.Stream {
		panic(http.ErrAbortHandler) // closes the connection, no response
	}
	usage := reply.Usage
	if usage == (Usage{}) && cache != nil {
		u, ok := cache.Usage(api, req.Model, body)
		if !ok {
			writeError(w, api, Reply{Status: http.StatusBadRequest, errMessage: ErrTooManyBreakpoints})
			return
		}
		usage = u
		usage.CompletionTokens = max(1, len(reply.Text)/4)
	}
	if usage == (Usage{}) {
		usage = Usage{PromptTokens: max(1, len(body)/4), CompletionTokens: max(1, len(reply.Text)/4)}
	}
	id := s.ids.Add(1)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case api == OpenAI && req.Stream:
		streamOpenAI(w, req, reply, usage, id)
	case api == OpenAI:
		writeJSON(w, openAICompletion(req, reply, usage, id))
	case req.Stream:
		streamAnthropic(w, req, reply, usage, id)
	default:
		writeJSON(w, anthropicMessage(req, reply, usage, id))
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func writeError(w http.ResponseWriter, api API, reply Reply) {
	if reply.RetryAfter != "" {
		w.Header().Set("Retry-After", reply.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.Status)
	msg := fmt.Sprintf("scripted error %d", reply.Status)
	if reply.errMessage != "" {
		msg = reply.errMessage
	}
	if api == OpenAI {
		writeJSON(w, map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": nil, "param": nil}})
		return
	}
	typ := "api_error"
	switch reply.Status {
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case http.StatusBadRequest:
		typ = "invalid_request_error"
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case 529:
		typ = "overloaded_error"
	}
	writeJSON(w, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func writeJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	_, _ = w.Write(b)
}

// fragments splits text into word-sized pieces that join back to it.
func fragments(text string) []string {
	if text == "" {
		return nil
	}
	return strings.SplitAfter(text, " ")
}

// halves splits s in two so that a tool input arrives in several deltas.
func halves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	if s, ok := data.(string); ok {
		fmt.Fprintf(w, "data: %s\n\n", s)
	} else {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// parseRequest reads what tests and the default reply need from a body.
func parseRequest(api API, r *http.Request, body []byte) Request {
	req := Request{API: api, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var b struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			openAIToolMessage
		} `json:"messages"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		ResponseFormat map[string]any  `json:"response_format"`
		Stop           json.RawMessage `json:"stop"`
		StopSequences  []string        `json:"stop_sequences"`
	}
	if json.Unmarshal(body, &b) != nil {
		return req
	}
	tools := make([]openAIToolMessage, len(b.Messages))
	for i, m := range b.Messages {
		req.Images = append(req.Images, contentImages(m.Role, m.Content)...)
		tools[i] = m.openAIToolMessage
		tools[i].Role = m.Role
	}
	if api == OpenAI {
		req.toolComplaint = openAIToolRule(tools)
	}
	req.includeUsage = b.StreamOptions.IncludeUsage
	req.Model, req.Stream, req.ResponseFormat = b.Model, b.Stream, b.ResponseFormat
	req.Stop = b.StopSequences
	if len(b.Stop) > 0 {
		var one string
		if json.Unmarshal(b.Stop, &one) == nil {
			req.Stop = []string{one}
		} else {
			_ = json.Unmarshal(b.Stop, &req.Stop)
		}
	}
	if n := len(b.Messages); n > 0 {
		last := b.Messages[n-1]
		req.LastMessage, req.LastIsToolResult = contentText(last.Content)
		req.LastImages = lastImageURLs(last.Content)
		if h, rest, ok := strings.Cut(req.LastMessage, "]\n\n"); ok && strings.HasPrefix(h, InputHeaderPrefix) && !req.LastIsToolResult {
			req.LastHeader, req.LastMessage = h+"]", rest
		}
		if last.Role == "tool" {
			req.LastIsToolResult = true
		}
	}
	return req
}

// lastImageURLs lists the images of block content as URLs (data URLs for
// Anthropic's base64 blocks).
func lastImageURLs(raw json.RawMessage) []string {
	var blocks []struct {
		Type     string `json:"type"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
		Source struct {
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []string
	for _, bl := range blocks {
		switch bl.Type {
		case "image_url":
			out = append(out, bl.ImageURL.URL)
		case "image":
			out = append(out, "data:"+bl.Source.MediaType+";base64,"+bl.Source.Data)
		}
	}
	return out
}

// contentText flattens string or block content to text, reporting whether
// the last block was a tool result.
func contentText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return "", false
	}
	var parts []string
	toolResult := false
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			parts = append(parts, bl.Text)
			toolResult = false
		case "tool_result":
			text, _ := contentText(bl.Content)
			parts = append(parts, text)
			toolResult = true
		}
	}
	return strings.Join(parts, "\n"), toolResult
}

// contentImages finds the images of one message's content.
func contentImages(role string, raw json.RawMessage) []Image {
	var blocks []struct {
		Type     string `json:"type"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
		Content json.RawMessage `json:"content"`
	}
	// Plain text content has no images (and is not decoded: a long
	// history of it would cost the fake more than the turn it serves).
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return nil
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []Image
	for _, bl := range blocks {
		switch bl.Type {
		case "image_url":
			head, data, ok := strings.Cut(strings.TrimPrefix(bl.ImageURL.URL, "data:"), ";base64,")
			if b, err := base64.StdEncoding.DecodeString(data); ok && err == nil {
				out = append(out, Image{Role: role, MIMEType: head, Data: b})
			}
		case "image":
			if b, err := base64.StdEncoding.DecodeString(bl.Source.Data); err == nil && bl.Source.Type == "base64" {
				out = append(out, Image{Role: role, MIMEType: bl.Source.MediaType, Data: b})
			}
		case "tool_result":
			out = append(out, contentImages(role, bl.Content)...)
		}
	}
	return out
}
