package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/switchboard/switchboard/services"
)

// The OpenAI-compatible channel "api": POST /v1/chat/completions and GET
// /v1/models, so any OpenAI client or front end can talk to the agent. The
// server keeps the history: only the last user message of a request is
// stored (as the inbound message of channel api), and the answer is the
// agent's final answer to it; the client's system messages are that
// turn's instruction, and its settings (max_tokens, temperature, stop,
// response_format, images) go with the message to the turn
// (services.TurnRequest). Unsupported fields are refused by name
// (openai_request.go); a failed turn is an OpenAI-shaped error with a
// status that fits what failed. The request's `user` field picks the
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

// apiErrorType is OpenAI's error type for a status.
func apiErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusConflict:
		return "conflict_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// apiErrorCode is the code of an error that names none: one per status,
// so that every /v1 error carries a code a client can switch on.
func apiErrorCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusUnauthorized:
		return "invalid_api_key"
	case http.StatusForbidden:
		return "permission_denied"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case http.StatusServiceUnavailable:
		return "service_unavailable"
	case http.StatusGatewayTimeout:
		return "timeout"
	}
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request"
}

// apiErrorBody is OpenAI's error shape; an empty param is null, an empty
// code is the status's (apiErrorCode).
func apiErrorBody(status int, code, param, msg string) apiError {
	d := apiErrorDetail{Message: msg, Type: apiErrorType(status)}
	if code == "" {
		code = apiErrorCode(status)
	}
	d.Code = &code
	if param != "" {
		d.Param = &param
	}
	return apiError{Error: d}
}

// writeAPIError answers with status and OpenAI's error shape.
func writeAPIError(c echo.Context, status int, code, msg string) error {
	return c.JSON(status, apiErrorBody(status, code, "", msg))
}

// apiErrorFrom answers any error in OpenAI's shape: an *apiFail as it is,
// a domain error with the status of its kind (internal errors are logged
// and shown as "Internal error." only).
func (s *Server) apiErrorFrom(c echo.Context, err error) error {
	var f *apiFail
	if errors.As(err, &f) {
		if f.retryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
		}
		return c.JSON(f.status, apiErrorBody(f.status, f.code, f.param, f.msg))
	}
	status := statusOf(err)
	if status == http.StatusInternalServerError {
		s.log.Error("api request failed", "path", c.Path(), "err", err)
	}
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "5")
	}
	code := services.ErrorCode(err)
	if code == "" && services.IsKind(err, services.ETOOLARGE) {
		code = "message_too_long" // the text is over the message limit
	}
	return writeAPIError(c, status, code, services.ErrorMessage(err))
}

// isAPIPath reports whether a request is for the OpenAI-compatible API,
// whose every answer, errors included, is in OpenAI's shape.
func isAPIPath(path string) bool { return path == "/v1" || strings.HasPrefix(path, "/v1/") }

// apiRouteError answers an error the router or a middleware raised on a
// /v1 path (unknown route, wrong method, oversize body, …) in OpenAI's
// shape.
func (s *Server) apiRouteError(c echo.Context, err error) {
	r := c.Request()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			_ = s.apiErrorFrom(c, &apiFail{status: http.StatusNotFound, code: "unknown_url",
				msg: "unknown URL: " + r.Method + " " + r.URL.Path + "; this endpoint serves GET /v1/models, GET /v1/models/{id} and POST /v1/chat/completions"})
		case http.StatusMethodNotAllowed:
			allowed := "POST"
			if strings.HasPrefix(r.URL.Path, "/v1/models") {
				allowed = "GET"
			}
			_ = s.apiErrorFrom(c, &apiFail{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
				msg: "method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + allowed})
		case http.StatusRequestEntityTooLarge:
			_ = s.apiErrorFrom(c, tooLarge())
		default:
			msg := http.StatusText(he.Code)
			if m, ok := he.Message.(string); ok && he.Code < 500 {
				msg = m
			}
			_ = writeAPIError(c, he.Code, "", msg)
		}
		return
	}
	_ = s.apiErrorFrom(c, err)
}

// requireAPIOwner is requireOwner with OpenAI-shaped refusals: the owner's
// bearer token (or session cookie, same origin only for writes).
func (s *Server) requireAPIOwner(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		kind := s.authOf(c)
		if kind == authNone {
			return writeAPIError(c, http.StatusUnauthorized, "invalid_api_key", "invalid or missing API key: send it as Authorization: Bearer <key>")
		}
		if kind == authCookie && r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			return writeAPIError(c, http.StatusForbidden, "", "cross-origin request refused")
		}
		return next(c)
	}
}

// registerOpenAIRoutes adds the /v1 routes: bodies up to APIBodyLimit
// (images travel inline), every other path 404 after authentication.
func (s *Server) registerOpenAIRoutes(e *echo.Echo) {
	v1 := e.Group("/v1", s.requireAPIOwner, middleware.BodyLimit(strconv.Itoa(APIBodyLimit/1024)+"K"))
	v1.GET("/models", s.handleAPIModels)
	v1.GET("/models/:model", s.handleAPIModel)
	v1.POST("/chat/completions", s.handleChatCompletions)
	v1.RouteNotFound("", apiNoRoute)
	v1.RouteNotFound("/*", apiNoRoute)
}

// apiNoRoute answers a /v1 request no route takes: 405 with Allow for a
// known path asked with another method, else 404.
func apiNoRoute(c echo.Context) error {
	p := strings.TrimSuffix(c.Request().URL.Path, "/")
	model, isModel := strings.CutPrefix(p, "/v1/models/")
	switch {
	case p == "/v1/chat/completions":
		c.Response().Header().Set("Allow", "POST")
	case p == "/v1/models" || isModel && model != "" && !strings.Contains(model, "/"):
		c.Response().Header().Set("Allow", "GET")
	default:
		return echo.ErrNotFound
	}
	return echo.ErrMethodNotAllowed
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
		return s.apiErrorFrom(c, modelNotFound(c.Param("model")))
	}
	return c.JSON(http.StatusOK, apiModel{ID: APIModelID, Object: "model", Created: apiModelCreated, OwnedBy: "switchboard"})
}

// modelNotFound refuses a model GET /v1/models does not list.
func modelNotFound(model string) *apiFail {
	return &apiFail{status: http.StatusNotFound, code: "model_not_found", param: "model",
		msg: "The model " + strconv.Quote(model) + " does not exist; the only model is " + strconv.Quote(APIModelID) + " (GET /v1/models)"}
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
	// empty for an answer. meta is the notice's metadata (what failed).
	notice string
	meta   services.MessageMeta
	runID  int64
	msgID  int64
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
		page, err := w.s.opts.Chat.TimelineAfter(ctx, w.timeline, after, 500)
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
	meta := m.Meta
	if m.Role != services.RoleAssistant || meta.ReplyTo != w.msgID || (meta.Notice != "" && meta.Notice != services.NoticeOfflineModel) {
		return turnResult{}, false
	}
	res := turnResult{content: m.Content, runID: meta.RunID, msgID: m.ID, meta: meta}
	if m.Source == services.SourceSystem && meta.RunStatus != "" && meta.RunStatus != services.RunOK {
		res.notice = string(meta.RunStatus)
	}
	if meta.Notice == services.NoticeOfflineModel {
		res.notice = services.NoticeOfflineModel
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
	body, err := readAPIBody(c.Request())
	if err != nil {
		return s.apiErrorFrom(c, err)
	}
	maxInstruction := s.opts.MaxMessageBytes
	if maxInstruction <= 0 {
		maxInstruction = 32 << 10
	}
	req, err := parseChatRequest(body, s.opts.ModelReadsImages, maxInstruction)
	if err != nil {
		return s.apiErrorFrom(c, err)
	}
	if req.Model != APIModelID {
		return s.apiErrorFrom(c, modelNotFound(req.Model))
	}
	var cmd services.ParsedCommand
	cmd.Name, cmd.Args, _ = services.ParseCommand(req.Text)
	isCommand := cmd.Name != ""
	if s.opts.Provider == "offline" && !isCommand {
		return s.apiErrorFrom(c, &apiFail{status: http.StatusServiceUnavailable, code: "model_not_configured",
			msg: "no language model is configured on the server (LLM_PROVIDER, LLM_MODEL); nothing was stored"})
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
	post := services.PostParams{TimelineScope: timeline, Source: services.SourceAPI, Content: req.Text, Command: &cmd}
	if req.Turn != nil && len(req.Turn.Images) > 0 && s.opts.Media != nil {
		// Image parts become the message's attachments, like an upload: the
		// bytes are stored once in the workspace, the prompt of this turn
		// carries them as images and history a line naming each.
		for i, im := range req.Turn.Images {
			name := fmt.Sprintf("image-%d.%s", i+1, strings.TrimPrefix(strings.TrimPrefix(im.MIMEType, "image/"), "j"))
			a, err := s.opts.Media.Save(ctx, timeline, services.Upload{Name: name, MIMEType: im.MIMEType, Data: im.Data})
			if err != nil {
				return s.apiErrorFrom(c, err)
			}
			post.Attachments = append(post.Attachments, a)
		}
		req.Turn.Images = nil
	}
	if req.Turn != nil {
		meta := services.MessageMeta{Request: req.Turn}
		if isCommand {
			meta.Command = cmd.Name
		}
		post.Metadata = meta.Encode()
	}
	msg, _, err := s.opts.Chat.Post(ctx, post)
	if err != nil {
		return s.apiErrorFrom(c, err)
	}
	if req.Ignored > 0 {
		// The server's history stands in for them (docs/API.md).
		c.Response().Header().Set("X-Switchboard-Ignored-Messages", strconv.Itoa(req.Ignored))
	}
	// A client that goes away before its answer (an aborted stream, a
	// closed connection) was the only listener: its run is stopped, as on
	// /stop, instead of running to its end unread and billed.
	defer s.stopAbandoned(c, timeline, msg.ID)
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
	if f := runFailure(res); f != nil {
		return s.apiErrorFrom(c, f)
	}
	content, err := checkAnswerFormat(req, res)
	if err != nil {
		return s.apiErrorFrom(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": APIModelID,
		"choices": []map[string]any{{"index": 0, "finish_reason": finishReason(res), "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": content, "refusal": nil}}},
		"usage": s.usageOf(context.WithoutCancel(ctx), res.runID),
	})
}

// finishReason is "length" for an answer cut at max_tokens, else "stop".
func finishReason(res turnResult) string {
	if res.meta.Truncated {
		return "length"
	}
	return "stop"
}

// runFailure is the error answering a turn that ended without an answer
// (nil for an answer): the status fits what failed — the model server
// (502, 504 when it timed out, 429 with Retry-After when it was rate
// limited, 503 when it is not configured or unknown there), the run's time
// limit (504), a restart (503), /stop (409), anything else (500).
func runFailure(res turnResult) *apiFail {
	if res.notice == "" {
		return nil
	}
	msg := strings.TrimPrefix(res.content, "I could not answer: ")
	stored := " (the message is stored, id " + strconv.FormatInt(res.msgID, 10) + " in the timeline)"
	m := res.meta
	switch services.RunStatus(res.notice) {
	case services.RunTimeout:
		return &apiFail{status: http.StatusGatewayTimeout, code: "timeout", msg: msg}
	case services.RunCancelled:
		return &apiFail{status: http.StatusConflict, code: "run_cancelled", msg: "the owner stopped this answer (/stop)" + stored}
	case services.RunInterrupted:
		return &apiFail{status: http.StatusServiceUnavailable, code: "run_interrupted", retryAfter: 5, msg: msg}
	case services.RunError:
	default:
		if res.notice == services.NoticeOfflineModel {
			return &apiFail{status: http.StatusServiceUnavailable, code: "model_not_configured", msg: "no language model is configured on the server (LLM_PROVIDER, LLM_MODEL)"}
		}
		return &apiFail{status: http.StatusInternalServerError, code: "run_failed", msg: msg}
	}
	switch m.ErrorCode {
	case "LLM_UNREACHABLE":
		switch {
		case m.ModelStatus == http.StatusTooManyRequests:
			secs := int((m.RetryAfterMS + 999) / 1000)
			if secs <= 0 {
				secs = 5
			}
			return &apiFail{status: http.StatusTooManyRequests, code: "rate_limit_exceeded", retryAfter: secs, msg: msg}
		case m.ModelTimeout:
			return &apiFail{status: http.StatusGatewayTimeout, code: "model_timeout", msg: msg}
		}
		return &apiFail{status: http.StatusBadGateway, code: "model_error", msg: msg}
	case "LLM_REJECTED":
		if m.ModelStatus == http.StatusNotFound {
			return &apiFail{status: http.StatusServiceUnavailable, code: "model_unavailable", msg: msg}
		}
		return &apiFail{status: http.StatusBadGateway, code: "model_rejected", msg: msg}
	case "LLM_AUTH":
		return &apiFail{status: http.StatusBadGateway, code: "model_auth", msg: msg}
	case "LLM_STREAM_INTERRUPTED", "LLM_MALFORMED_TOOL_CALL":
		return &apiFail{status: http.StatusBadGateway, code: "model_error", msg: msg}
	case "LLM_CANCELLED":
		return &apiFail{status: http.StatusServiceUnavailable, code: "model_cancelled", retryAfter: 5, msg: msg}
	}
	return &apiFail{status: http.StatusInternalServerError, code: "run_failed", msg: msg}
}

// checkAnswerFormat checks an answer against the request's response_format
// and returns the content to send: for a JSON format the JSON alone (a code
// fence around it is removed). An answer that is not what was asked for is
// a 502 naming the problem; it stays stored in the timeline.
func checkAnswerFormat(req apiRequest, res turnResult) (string, error) {
	if req.Turn == nil || req.Turn.ResponseFormat == nil || res.meta.Truncated {
		// An answer cut at max_tokens is sent as it is, with finish_reason
		// "length", as OpenAI does.
		return res.content, nil
	}
	rf := req.Turn.ResponseFormat
	text := stripFence(res.content)
	fail := func(format string, args ...any) error {
		return &apiFail{status: http.StatusBadGateway, code: "response_format_mismatch", param: "response_format",
			msg: fmt.Sprintf("the model's answer does not match response_format "+rf.Type+": "+format+
				" (the answer is stored in the timeline, message id %d)", append(args, res.msgID)...)}
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return "", fail("it is not JSON (%v): %.120q", err, text)
	}
	if rf.Type == services.ResponseJSONObject {
		if _, ok := v.(map[string]any); !ok {
			return "", fail("it is JSON but not an object: %.120q", text)
		}
		return text, nil
	}
	if req.schema != nil {
		if err := req.schema.Validate(v); err != nil {
			return "", fail("schema %q: %v", rf.Name, err)
		}
	}
	return text, nil
}

// stripFence removes one Markdown code fence around s.
func stripFence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return t
	}
	t = strings.TrimSuffix(t[3:], "```")
	if nl := strings.IndexByte(t, '\n'); nl >= 0 && !strings.ContainsAny(t[:nl], "{[\"") {
		t = t[nl+1:] // the info string (json)
	}
	return strings.TrimSpace(t)
}

// stopAbandoned stops the run of message msgID when the request's client
// went away before the answer (the request's own context ended; a turn
// timeout leaves the run going: its answer still reaches the timeline).
func (s *Server) stopAbandoned(c echo.Context, timeline string, msgID int64) {
	if s.opts.Stopper == nil || !errors.Is(c.Request().Context().Err(), context.Canceled) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
	defer cancel()
	if err := s.opts.Stopper.StopTurn(ctx, timeline, msgID, "the API client went away before the answer"); err != nil {
		s.log.Warn("api: stop the run of a client that went away", "message_id", msgID, "err", err)
	}
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
// any output still gets its error status; a failure after it is an
// `event: error` whose data is OpenAI's error object, which the SDKs raise
// as an error, and no [DONE].
func (s *Server) streamCompletion(c echo.Context, ctx context.Context, w *turnWaiter, sub services.Subscription,
	req apiRequest, id string, created int64, timeout time.Duration) error {
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
			if err := writeSSE(resp, "", chunk(id, created, map[string]any{"role": "assistant", "content": ""}, nil)); err != nil {
				return err
			}
		}
		return writeSSE(resp, "", v)
	}
	fail := func(f *apiFail) error {
		if !started {
			return s.apiErrorFrom(c, f)
		}
		_ = writeSSE(resp, "error", apiErrorBody(f.status, f.code, f.param, f.msg))
		return nil
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
			return fail(&apiFail{status: http.StatusGatewayTimeout, code: "timeout",
				msg: "no answer from the agent within " + timeout.String() + "; the answer will appear in the timeline"})
		}
		return nil
	}
	if f := runFailure(res); f != nil {
		return fail(f)
	}
	final, err := checkAnswerFormat(req, res)
	if err != nil {
		var f *apiFail
		errors.As(err, &f)
		return fail(f)
	}
	// Text streamed by earlier model calls of the run (before a tool call)
	// is not part of the final answer: then the answer follows in full.
	// (A JSON answer's fence, if any, was streamed as the model wrote it.)
	rest := final
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
	if err := send(chunk(id, created, map[string]any{}, finishReason(res))); err != nil {
		return nil
	}
	if req.IncludeUsage {
		u := s.usageOf(context.WithoutCancel(ctx), res.runID)
		_ = send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": APIModelID,
			"choices": []any{}, "usage": u})
	}
	_, _ = io.WriteString(resp, "data: [DONE]\n\n")
	resp.Flush()
	return nil
}

// writeSSE writes one event (named event, or a plain data event) and
// flushes it.
func writeSSE(resp *echo.Response, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var buf []byte
	if event != "" {
		buf = append(buf, "event: "+event+"\n"...)
	}
	buf = append(append(append(buf, "data: "...), b...), '\n', '\n')
	if _, err := resp.Write(buf); err != nil {
		return err
	}
	resp.Flush()
	return nil
}
