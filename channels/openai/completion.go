package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// completion is one request being answered: the parsed request, the
// subscription its answer arrives on, and the completion's id and time.
type completion struct {
	c       echo.Context
	req     apiRequest
	waiter  *turnWaiter
	sub     services.Subscription
	id      string
	created int64
}

func (ch *Channel) handleChatCompletions(c echo.Context) error {
	body, err := readBody(c.Request())
	if err != nil {
		return ch.fail(c, err)
	}
	req, err := parseChatRequest(body, ch.cfg.ModelReadsImages, ch.cfg.MaxMessageBytes)
	if err != nil {
		return ch.fail(c, err)
	}
	if req.Model != ModelID {
		return ch.fail(c, modelNotFound(req.Model))
	}
	var cmd services.ParsedCommand
	cmd.Name, cmd.Args, _ = services.ParseCommand(req.Text)
	if ch.cfg.Provider == "offline" && cmd.Name == "" {
		return ch.fail(c, &apiFail{status: http.StatusServiceUnavailable, code: "model_not_configured",
			msg: "no language model is configured on the server (LLM_PROVIDER, LLM_MODEL); nothing was stored"})
	}
	timeline := Timeline(ch.cfg.OwnerTimeline, req.User)
	ctx, cancel := context.WithTimeout(c.Request().Context(), ch.cfg.TurnTimeout)
	defer cancel()
	// The answer (streamed or not) may take up to the turn timeout: the
	// server's read and write deadlines move past it.
	clearDeadlines(c.Response(), time.Now().Add(ch.cfg.TurnTimeout+30*time.Second))

	// Subscribe before posting, so no event of the answer can be missed.
	sub, err := ch.deps.Hub.Subscribe(ctx, timeline, 1024)
	if err != nil {
		ch.log.Warn("api: subscribe", "timeline", timeline, "err", err)
		return ch.fail(c, services.Errorf(services.EUNAVAILABLE, "the database is unavailable; retry"))
	}
	defer ch.deps.Hub.Unsubscribe(sub)
	msg, err := ch.post(ctx, timeline, &req, cmd)
	if err != nil {
		return ch.fail(c, err)
	}
	if req.Ignored > 0 {
		// The server's history stands in for them (docs/API.md).
		c.Response().Header().Set("X-Switchboard-Ignored-Messages", strconv.Itoa(req.Ignored))
	}
	// A client that goes away before its answer (an aborted stream, a
	// closed connection) was the only listener: its run is stopped, as on
	// /stop, instead of running to its end unread and billed.
	defer ch.stopAbandoned(c, timeline, msg.ID)
	comp := &completion{c: c, req: req, sub: sub, id: "chatcmpl-" + strconv.FormatInt(msg.ID, 10), created: msg.CreatedAt.Unix(),
		waiter: &turnWaiter{ch: ch, timeline: timeline, msgID: msg.ID, runs: map[int64]bool{}}}
	if req.Stream {
		return ch.stream(ctx, comp)
	}
	return ch.answer(ctx, comp)
}

// post stores the request's message in timeline: its text, its images as
// attachments, its settings (and command, when it is one) in its metadata.
func (ch *Channel) post(ctx context.Context, timeline string, req *apiRequest, command services.ParsedCommand) (services.Message, error) {
	post := services.PostParams{TimelineScope: timeline, Source: services.SourceAPI, Content: req.Text, Command: &command}
	if req.Turn != nil && len(req.Turn.Images) > 0 && ch.deps.Media != nil {
		// Image parts become the message's attachments, like an upload: the
		// bytes are stored once in the workspace, the prompt of this turn
		// carries them as images and history a line naming each.
		for i, im := range req.Turn.Images {
			name := fmt.Sprintf("image-%d.%s", i+1, strings.TrimPrefix(strings.TrimPrefix(im.MIMEType, "image/"), "j"))
			a, err := ch.deps.Media.Save(ctx, timeline, services.Upload{Name: name, MIMEType: im.MIMEType, Data: im.Data})
			if err != nil {
				return services.Message{}, err
			}
			post.Attachments = append(post.Attachments, a)
		}
		req.Turn.Images = nil
	}
	if req.Turn != nil {
		post.Metadata = services.MessageMeta{Request: req.Turn, Command: command.Name}.Encode()
	}
	msg, _, err := ch.deps.Chat.Post(ctx, post)
	return msg, err
}

// answer waits for the answer and sends it as one chat.completion.
func (ch *Channel) answer(ctx context.Context, comp *completion) error {
	c := comp.c
	res, err := comp.waiter.wait(ctx, comp.sub)
	if err != nil {
		return ch.waitError(c, err)
	}
	if f := runFailure(res); f != nil {
		return ch.fail(c, f)
	}
	content, err := checkAnswerFormat(comp.req, res)
	if err != nil {
		return ch.fail(c, err)
	}
	return c.JSON(http.StatusOK, Completion{
		ID: comp.id, Object: "chat.completion", Created: comp.created, Model: ModelID,
		Choices: []Choice{{FinishReason: finishReason(res),
			Message: Message{Role: "assistant", Content: content}}},
		Usage: ch.usageOf(context.WithoutCancel(ctx), res.runID),
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
	switch services.RunStatus(res.notice) {
	case services.RunTimeout:
		return &apiFail{status: http.StatusGatewayTimeout, code: "timeout", msg: msg}
	case services.RunCancelled:
		return &apiFail{status: http.StatusConflict, code: "run_cancelled", msg: "the owner stopped this answer (/stop)" + stored}
	case services.RunInterrupted:
		return &apiFail{status: http.StatusServiceUnavailable, code: "run_interrupted", retryAfter: 5, msg: msg}
	case services.RunError:
		return modelFailure(res.meta, msg)
	}
	if res.notice == services.NoticeOfflineModel {
		return &apiFail{status: http.StatusServiceUnavailable, code: "model_not_configured", msg: "no language model is configured on the server (LLM_PROVIDER, LLM_MODEL)"}
	}
	return &apiFail{status: http.StatusInternalServerError, code: "run_failed", msg: msg}
}

// modelFailure is the error answering a run that failed (RunError), by
// what its notice's metadata says failed.
func modelFailure(m services.MessageMeta, msg string) *apiFail {
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
func (ch *Channel) stopAbandoned(c echo.Context, timeline string, msgID int64) {
	if ch.deps.Stopper == nil || !errors.Is(c.Request().Context().Err(), context.Canceled) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
	defer cancel()
	if err := ch.deps.Stopper.StopTurn(ctx, timeline, msgID, "the API client went away before the answer"); err != nil {
		ch.log.Warn("api: stop the run of a client that went away", "message_id", msgID, "err", err)
	}
}

// waitError answers a wait that ended without the reply (before any
// output was sent).
func (ch *Channel) waitError(c echo.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return c.JSON(http.StatusGatewayTimeout, errorBody(http.StatusGatewayTimeout, "timeout", "",
			"no answer from the agent within "+ch.cfg.TurnTimeout.String()+"; the message is stored and the answer will appear in the timeline"))
	}
	if c.Request().Context().Err() != nil {
		return nil // the client went away
	}
	return ch.fail(c, err)
}

// clearDeadlines moves the connection's read and write deadlines to until.
func clearDeadlines(w http.ResponseWriter, until time.Time) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(until)
	_ = rc.SetWriteDeadline(until)
}
