package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// The OpenAI-compatible channel "api": POST /v1/chat/completions and GET
// /v1/models, so any OpenAI client or front end can talk to the agent. The
// server keeps the history: only the last user message of a request is
// stored (as the inbound message of channel api), and the answer is the
// agent's final answer to it. The request's `user` field picks the
// timeline: absent, the owner's; a value, the timeline "api:<user>". See
// docs/API.md.

// APIModelID is the one model GET /v1/models lists.
const APIModelID = "switchboard"

// DefaultAPITurnTimeout bounds how long a request waits for the agent's
// answer when Options.APITurnTimeout is zero.
const DefaultAPITurnTimeout = 10 * time.Minute

// maxAPIUser bounds a `user` value used verbatim in a timeline name.
const maxAPIUser = 64

// RunReader reads agent runs: the API channel maps streamed events to the
// run its message triggered and reports the run's token usage.
type RunReader interface {
	// GetRun returns one run; ENOTFOUND when absent.
	GetRun(ctx context.Context, id int64) (services.Run, error)
}

// apiError is OpenAI's error body.
type apiError struct {
	Error apiErrorDetail `json:"error"`
}

type apiErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeAPIError answers with status and OpenAI's error shape.
func writeAPIError(c echo.Context, status int, code, msg string) error {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	d := apiErrorDetail{Message: msg, Type: typ}
	if code != "" {
		d.Code = &code
	}
	return c.JSON(status, apiError{Error: d})
}

// apiErrorFrom answers a domain error in OpenAI's shape (internal errors
// are logged and shown as "Internal error." only).
func (s *Server) apiErrorFrom(c echo.Context, err error) error {
	status := statusOf(err)
	if status == http.StatusInternalServerError {
		s.log.Error("api request failed", "path", c.Path(), "err", err)
	}
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "5")
	}
	return writeAPIError(c, status, services.ErrorCode(err), services.ErrorMessage(err))
}

// requireAPIOwner is requireOwner with OpenAI-shaped refusals: the owner's
// bearer token (or session cookie, same origin only for writes).
func (s *Server) requireAPIOwner(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		kind := s.authOf(c)
		if kind == authNone {
			return writeAPIError(c, http.StatusUnauthorized, "invalid_api_key", "unauthorized")
		}
		if kind == authCookie && r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			return writeAPIError(c, http.StatusForbidden, "", "cross-origin request refused")
		}
		return next(c)
	}
}

// registerOpenAIRoutes adds the /v1 routes.
func (s *Server) registerOpenAIRoutes(e *echo.Echo) {
	v1 := e.Group("/v1", s.requireAPIOwner)
	v1.GET("/models", s.handleAPIModels)
	v1.GET("/models/:model", s.handleAPIModel)
	v1.POST("/chat/completions", s.handleChatCompletions)
}

// apiModel is one entry of GET /v1/models.
type apiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// apiModelCreated is a fixed creation time (the endpoint's first release).
const apiModelCreated = 1767225600 // 2026-01-01T00:00:00Z

func (s *Server) handleAPIModels(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": []apiModel{
		{ID: APIModelID, Object: "model", Created: apiModelCreated, OwnedBy: "switchboard"}}})
}

func (s *Server) handleAPIModel(c echo.Context) error {
	if c.Param("model") != APIModelID {
		return writeAPIError(c, http.StatusNotFound, "model_not_found", "model "+strconv.Quote(c.Param("model"))+" does not exist; the only model is "+APIModelID)
	}
	return c.JSON(http.StatusOK, apiModel{ID: APIModelID, Object: "model", Created: apiModelCreated, OwnedBy: "switchboard"})
}

// ChatCompletionRequest is the part of OpenAI's request the channel reads;
// other fields (temperature, tools, …) are accepted and ignored: the agent
// has its own model settings and tools.
type ChatCompletionRequest struct {
	Model         string             `json:"model"`
	Messages      []ChatMessageInput `json:"messages"`
	Stream        bool               `json:"stream"`
	StreamOptions *ChatStreamOptions `json:"stream_options,omitempty"`
	User          *string            `json:"user,omitempty"`
}

// ChatStreamOptions is OpenAI's stream_options.
type ChatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessageInput is one message of a request: content is a string or an
// array of parts, of which the text parts are read.
type ChatMessageInput struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text returns the message's text: the string, or its text parts joined
// by newlines.
func (m ChatMessageInput) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", errors.New("content: want a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// apiUserRE is a `user` value used verbatim in its timeline's name.
var apiUserRE = regexp.MustCompile(`^[A-Za-z0-9._@-]+$`)

// APITimeline returns the timeline a request's `user` selects: the owner's
// when absent or empty, else "api:<user>" for a value of at most 64 of
// A-Z a-z 0-9 . _ @ -, and "api:h-<first 16 hex digits of its SHA-256>" for
// any other value (so every value gets its own, stable timeline).
func APITimeline(owner string, user *string) string {
	if user == nil || *user == "" {
		return owner
	}
	u := *user
	if len(u) <= maxAPIUser && apiUserRE.MatchString(u) {
		return "api:" + u
	}
	h := sha256.Sum256([]byte(u))
	return "api:h-" + hex.EncodeToString(h[:8])
}

// parseChatRequest decodes and validates a request, returning it and the
// inbound text (the last user message).
func parseChatRequest(r *http.Request) (ChatCompletionRequest, string, error) {
	var req ChatCompletionRequest
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return req, "", services.Errorf(services.EINVALID, "Content-Type must be application/json, got %q", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, "", services.Errorf(services.ETOOLARGE, "request body is over %d bytes", tooBig.Limit)
		}
		return req, "", services.Errorf(services.EINVALID, "reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return req, "", services.Errorf(services.EINVALID, "request body is empty; want a JSON object")
	}
	if !utf8.Valid(body) {
		return req, "", services.Errorf(services.EINVALID, "request body is not valid UTF-8 (at byte %d)", invalidUTF8At(body))
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return req, "", services.Errorf(services.EINVALID, "invalid JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ):
			return req, "", services.Errorf(services.EINVALID, "field %s: want %s, got JSON %s", typ.Field, jsonKind(typ.Type), typ.Value)
		}
		return req, "", services.Errorf(services.EINVALID, "invalid JSON: %v", err)
	}
	if err := checkTextFields(req); err != nil {
		return req, "", err
	}
	if req.Model == "" {
		return req, "", services.Errorf(services.EINVALID, "model is required (use %q)", APIModelID)
	}
	if len(req.Messages) == 0 {
		return req, "", services.Errorf(services.EINVALID, "messages is empty; want at least one user message")
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		text, err := m.text()
		if err != nil {
			return req, "", services.Errorf(services.EINVALID, "messages[%d].%v", i, err)
		}
		if strings.TrimSpace(text) == "" {
			return req, "", services.Errorf(services.EINVALID, "messages[%d] (the last user message) has no text", i)
		}
		if err := checkText("messages["+strconv.Itoa(i)+"].content", text); err != nil {
			return req, "", err
		}
		return req, text, nil
	}
	return req, "", services.Errorf(services.EINVALID, "messages has no message with role \"user\"")
}

// jsonKind names a Go type as the JSON a client should send.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// turnResult is the agent's answer to one inbound message.
type turnResult struct {
	content string
	// notice is the run status of a system notice ("error", "timeout", …);
	// empty for an answer.
	notice string
	runID  int64
}

// turnWaiter follows a timeline's subscription until the answer to one
// message arrives, handing streamed text of that message's run to onDelta.
type turnWaiter struct {
	s        *Server
	timeline string
	msgID    int64
	// runs caches whether a run id belongs to the message (true) or not.
	runs    map[int64]bool
	onDelta func(text string) error
}

// wait reads sub until the reply arrives, ctx ends, or the subscription is
// dropped; a dropped subscription is replaced and the reply looked up in
// the timeline, so a slow reader loses nothing.
func (w *turnWaiter) wait(ctx context.Context, sub services.Subscription) (turnResult, error) {
	for {
		select {
		case <-ctx.Done():
			return turnResult{}, ctx.Err()
		case it, ok := <-sub.Items():
			if !ok {
				next, res, found, err := w.resubscribe(ctx)
				if err != nil || found {
					return res, err
				}
				sub = next
				continue
			}
			if res, done, err := w.item(ctx, it); done || err != nil {
				return res, err
			}
		}
	}
}

// resubscribe replaces a dropped subscription and looks for a reply stored
// meanwhile. The caller unsubscribes the returned subscription.
func (w *turnWaiter) resubscribe(ctx context.Context) (services.Subscription, turnResult, bool, error) {
	sub, err := w.s.opts.Hub.Subscribe(ctx, w.timeline, 1024)
	if err != nil {
		return nil, turnResult{}, false, err
	}
	after := w.msgID
	for {
		page, err := w.s.opts.Chat.Timeline(ctx, w.timeline, 0, after, 500)
		if err != nil {
			w.s.opts.Hub.Unsubscribe(sub)
			return nil, turnResult{}, false, err
		}
		for _, m := range page.Messages {
			if res, ok := w.reply(m); ok {
				w.s.opts.Hub.Unsubscribe(sub)
				return nil, res, true, nil
			}
			after = m.ID
		}
		if len(page.Messages) < 500 {
			break
		}
	}
	// The caller's deferred Unsubscribe only holds the first subscription.
	go func() { <-ctx.Done(); w.s.opts.Hub.Unsubscribe(sub) }()
	return sub, turnResult{}, false, nil
}

// item handles one subscription item; done when it is the reply.
func (w *turnWaiter) item(ctx context.Context, it services.TimelineItem) (turnResult, bool, error) {
	if it.Message != nil {
		res, ok := w.reply(*it.Message)
		return res, ok, nil
	}
	e := it.Event
	if e == nil || e.RunID == 0 || (e.Type != services.EventDelta && e.Type != services.EventRun) {
		return turnResult{}, false, nil
	}
	mine, known := w.runs[e.RunID]
	if !known {
		mine = w.ownsRun(ctx, e.RunID)
		w.runs[e.RunID] = mine
	}
	if !mine || e.Type != services.EventDelta || w.onDelta == nil {
		return turnResult{}, false, nil
	}
	var d struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.Text == "" {
		return turnResult{}, false, nil
	}
	return turnResult{}, false, w.onDelta(d.Text)
}

// ownsRun reports whether runID was triggered by the waiter's message.
// Without a RunReader no run is known, so no text streams before the end.
func (w *turnWaiter) ownsRun(ctx context.Context, runID int64) bool {
	if w.s.opts.Runs == nil {
		return false
	}
	run, err := w.s.opts.Runs.GetRun(ctx, runID)
	if err != nil {
		w.s.log.Warn("api: read run", "run_id", runID, "err", err)
		return false
	}
	return run.TriggerMessageID == w.msgID
}

// reply reports whether m answers the waiter's message.
func (w *turnWaiter) reply(m services.Message) (turnResult, bool) {
	if m.Role != services.RoleAssistant || len(m.Metadata) == 0 {
		return turnResult{}, false
	}
	meta, err := services.DecodeMeta(m.Metadata)
	if err != nil || meta.ReplyTo != w.msgID || meta.Notice != "" {
		return turnResult{}, false
	}
	res := turnResult{content: m.Content, runID: meta.RunID}
	if m.Source == services.SourceSystem && meta.RunStatus != "" && meta.RunStatus != services.RunOK {
		res.notice = string(meta.RunStatus)
	}
	return res, true
}

// apiUsage is OpenAI's usage object.
type apiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// usageOf reads the provider-reported usage of the answer's run (zero when
// unknown: a command's answer, or no RunReader).
func (s *Server) usageOf(ctx context.Context, runID int64) apiUsage {
	if runID == 0 || s.opts.Runs == nil {
		return apiUsage{}
	}
	run, err := s.opts.Runs.GetRun(ctx, runID)
	if err != nil {
		return apiUsage{}
	}
	return apiUsage{PromptTokens: run.PromptTokens, CompletionTokens: run.CompletionTokens,
		TotalTokens: run.PromptTokens + run.CompletionTokens}
}

func (s *Server) handleChatCompletions(c echo.Context) error {
	req, text, err := parseChatRequest(c.Request())
	if err != nil {
		return s.apiErrorFrom(c, err)
	}
	timeline := APITimeline(s.opts.OwnerTimeline, req.User)
	timeout := s.opts.APITurnTimeout
	if timeout <= 0 {
		timeout = DefaultAPITurnTimeout
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), timeout)
	defer cancel()
	// The answer (streamed or not) may take up to the turn timeout: the
	// server's read and write deadlines move past it.
	clearDeadlines(c.Response(), time.Now().Add(timeout+30*time.Second))

	// Subscribe before posting, so no event of the answer can be missed.
	sub, err := s.opts.Hub.Subscribe(ctx, timeline, 1024)
	if err != nil {
		s.log.Warn("api: subscribe", "timeline", timeline, "err", err)
		return s.apiErrorFrom(c, services.Errorf(services.EUNAVAILABLE, "the database is unavailable; retry"))
	}
	defer s.opts.Hub.Unsubscribe(sub)
	msg, _, err := s.opts.Chat.Post(ctx, services.PostParams{TimelineScope: timeline, Source: services.SourceAPI, Content: text})
	if err != nil {
		return s.apiErrorFrom(c, err)
	}
	w := &turnWaiter{s: s, timeline: timeline, msgID: msg.ID, runs: map[int64]bool{}}
	id := "chatcmpl-" + strconv.FormatInt(msg.ID, 10)
	created := msg.CreatedAt.Unix()
	if req.Stream {
		return s.streamCompletion(c, ctx, w, sub, req, id, created, timeout)
	}
	res, err := w.wait(ctx, sub)
	if err != nil {
		return s.apiWaitError(c, err, timeout)
	}
	if res.notice != "" {
		c.Response().Header().Set("X-Switchboard-Run-Status", res.notice)
	}
	return c.JSON(http.StatusOK, map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": APIModelID,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": res.content, "refusal": nil}}},
		"usage": s.usageOf(context.WithoutCancel(ctx), res.runID),
	})
}

// apiWaitError answers a wait that ended without the reply (before any
// output was sent).
func (s *Server) apiWaitError(c echo.Context, err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return writeAPIError(c, http.StatusGatewayTimeout, "timeout",
			"no answer from the agent within "+timeout.String()+"; the message is stored and the answer will appear in the timeline")
	}
	if c.Request().Context().Err() != nil {
		return nil // the client went away
	}
	return s.apiErrorFrom(c, err)
}

// chunk is one chat.completion.chunk.
func chunk(id string, created int64, delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": APIModelID,
		"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
}

// streamCompletion answers with server-sent chat.completion.chunk events:
// the role, the run's streamed text as it comes, the rest of the final
// answer, a chunk with finish_reason "stop", optionally a usage chunk, and
// "data: [DONE]". Headers are sent with the first text, so a failure before
// any output still gets a plain error status.
func (s *Server) streamCompletion(c echo.Context, ctx context.Context, w *turnWaiter, sub services.Subscription,
	req ChatCompletionRequest, id string, created int64, timeout time.Duration) error {
	resp := c.Response()
	started := false
	var sent strings.Builder
	send := func(v any) error {
		if !started {
			started = true
			h := resp.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			resp.WriteHeader(http.StatusOK)
			if err := writeSSE(resp, chunk(id, created, map[string]any{"role": "assistant", "content": ""}, nil)); err != nil {
				return err
			}
		}
		return writeSSE(resp, v)
	}
	w.onDelta = func(text string) error {
		sent.WriteString(text)
		return send(chunk(id, created, map[string]any{"content": text}, nil))
	}
	res, err := w.wait(ctx, sub)
	if err != nil {
		if !started {
			return s.apiWaitError(c, err, timeout)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			_ = writeSSE(resp, apiError{Error: apiErrorDetail{Message: "no answer from the agent in time; the answer will appear in the timeline", Type: "server_error"}})
		}
		return nil
	}
	// Text streamed by earlier model calls of the run (before a tool call)
	// is not part of the final answer: then the answer follows in full.
	rest := res.content
	if streamed := sent.String(); streamed != "" {
		if after, ok := strings.CutPrefix(res.content, streamed); ok {
			rest = after
		} else {
			rest = "\n\n" + res.content
		}
	}
	if rest != "" || !started {
		if err := send(chunk(id, created, map[string]any{"content": rest}, nil)); err != nil {
			return nil
		}
	}
	if err := send(chunk(id, created, map[string]any{}, "stop")); err != nil {
		return nil
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := s.usageOf(context.WithoutCancel(ctx), res.runID)
		_ = send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": APIModelID,
			"choices": []any{}, "usage": u})
	}
	_, _ = io.WriteString(resp, "data: [DONE]\n\n")
	resp.Flush()
	return nil
}

// writeSSE writes one data event and flushes it.
func writeSSE(resp *echo.Response, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := resp.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
		return err
	}
	resp.Flush()
	return nil
}
