package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/mdhtml"
	"github.com/switchboard/switchboard/web/wire"
)

func toJSON(m services.Message) wire.Message {
	meta := m.Metadata
	if bytes.Contains(meta, []byte(`"request"`)) {
		meta = withoutRequest(meta)
	}
	if string(meta) == "{}" {
		meta = nil
	}
	return wire.Message{ID: m.ID, Timeline: m.TimelineScope, Role: string(m.Role), Source: string(m.Source),
		Content: m.Content, AgentID: m.AgentID, Metadata: meta, CreatedAt: m.CreatedAt}
}

// withoutRequest drops what an API message asked of its turn (settings,
// inline images) from the metadata clients get: it is the worker's, not
// theirs, and images would bloat every timeline page.
func withoutRequest(meta json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return meta
	}
	delete(m, "request")
	out, err := json.Marshal(m)
	if err != nil {
		return meta
	}
	return out
}

// present is how clients get messages: an answer with its Markdown
// rendered (sanitised HTML), the message it replies to, and the tool calls
// of the run that wrote it (one query for the whole list).
func (s *Server) present(ctx context.Context, msgs []services.Message) []wire.Message {
	out := make([]wire.Message, len(msgs))
	runs := make([]int64, len(msgs))
	approvals := make([]int64, len(msgs))
	var ids, approvalIDs []int64
	for i, m := range msgs {
		out[i] = toJSON(m)
		if m.Role != services.RoleAssistant {
			continue
		}
		meta := m.Meta
		out[i].ReplyTo = meta.ReplyTo
		out[i].HTML = mdhtml.Render(m.Content)
		if meta.RunID != 0 && meta.Kind != "handoff" {
			runs[i] = meta.RunID
			ids = append(ids, meta.RunID)
		}
		if meta.ApprovalID != 0 && m.Source == services.SourceSystem {
			approvals[i] = meta.ApprovalID
			approvalIDs = append(approvalIDs, meta.ApprovalID)
		}
	}
	s.presentFiles(ctx, msgs, out)
	s.presentApprovals(ctx, approvals, approvalIDs, out)
	if len(ids) == 0 || s.opts.Activity == nil {
		return out
	}
	acts, err := s.opts.Activity.ToolActivity(ctx, ids)
	if err != nil {
		s.log.Warn("tool activity unavailable", "err", err)
		return out
	}
	for i, run := range runs {
		for _, u := range acts[run] {
			out[i].Tools = append(out[i].Tools, wire.ToolUse{ID: u.ID, Name: u.Name, Arg: u.Arg, Status: u.Status, Code: u.Code, MS: u.DurationMS})
		}
	}
	return out
}

// presentApprovals gives each approval notice (approvals[i] != 0) the
// approval as it stands now (one query for the whole list): the page shows
// its buttons while it is pending, and its decision after.
func (s *Server) presentApprovals(ctx context.Context, approvals, ids []int64, out []wire.Message) {
	if len(ids) == 0 || s.opts.Approvals == nil {
		return
	}
	list, err := s.opts.Approvals.ListApprovals(ctx, services.ApprovalQuery{IDs: ids})
	if err != nil {
		s.log.Warn("approvals unavailable", "err", err)
		return
	}
	byID := make(map[int64]*wire.Approval, len(list))
	for _, a := range list {
		byID[a.ID] = &wire.Approval{ID: a.ID, CallID: a.CallID, Tool: a.Tool, Arguments: string(a.Arguments), Effect: string(a.Effect),
			TaintedBy: a.TaintedBy, State: string(a.State), DecidedBy: a.DecidedBy}
	}
	for i, id := range approvals {
		if a := byID[id]; a != nil {
			out[i].Approval = a
		}
	}
}

// decodeJSON reads a JSON body into v, naming what is wrong with a bad one.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return services.Errorf(services.EINVALID, "Content-Type must be application/json, got %q", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		var he *echo.HTTPError
		switch {
		case errors.As(err, &tooBig):
			return services.Errorf(services.ETOOLARGE, "request body is over %d bytes", tooBig.Limit)
		case errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge:
			// echo's body limit on a chunked body reports itself this way.
			return services.Errorf(services.ETOOLARGE, "request body is over %d bytes", MaxBodyBytes)
		}
		return services.Errorf(services.EINVALID, "reading the request body: %v", err)
	}
	// encoding/json would replace invalid UTF-8 with U+FFFD silently.
	if !utf8.Valid(body) {
		return services.Errorf(services.EINVALID, "request body is not valid UTF-8 (at byte %d)", invalidUTF8At(body))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return services.Errorf(services.EINVALID, "request body is empty; want a JSON object")
		case errors.As(err, &syn):
			return services.Errorf(services.EINVALID, "invalid JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ):
			return services.Errorf(services.EINVALID, "field %q: want %s, got JSON %s", typ.Field, typ.Type, typ.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return services.Errorf(services.EINVALID, "%s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return services.Errorf(services.EINVALID, "invalid JSON: %v", err)
	}
	if dec.More() {
		return services.Errorf(services.EINVALID, "request body has data after the JSON object")
	}
	return checkTextFields(v)
}

// clientSource is the channel a client's post is labelled with: the one it
// names (web, tui or api), else dflt — api for a REST post (a script or
// program: the chat page and the TUI name themselves), web for a websocket
// frame (the protocol the page and the TUI speak).
func clientSource(s string, dflt services.Source) (services.Source, error) {
	switch services.Source(s) {
	case "":
		return dflt, nil
	case services.SourceWeb, services.SourceTUI, services.SourceAPI:
		return services.Source(s), nil
	}
	return "", services.Errorf(services.EINVALID, "source %q: want web, tui or api", s)
}

// ownerPost turns a client's post (REST body or websocket frame) into the
// owner's PostParams: the source it names (else dflt), client_key as
// idempotency key.
func (s *Server) ownerPost(dflt services.Source, source, content, clientKey string) (services.PostParams, error) {
	src, err := clientSource(source, dflt)
	if err != nil {
		return services.PostParams{}, err
	}
	if len(clientKey) > 128 {
		return services.PostParams{}, services.Errorf(services.EINVALID, "client_key is over 128 characters")
	}
	key := ""
	if clientKey != "" {
		key = "client:" + clientKey
	}
	return services.PostParams{TimelineScope: s.opts.OwnerTimeline, Source: src, Content: content, DedupeKey: key}, nil
}

func (s *Server) handlePostMessage(c echo.Context) error {
	if isUpload(c) {
		return s.handleUpload(c)
	}
	var req wire.PostRequest
	if err := decodeJSON(c.Request(), &req); err != nil {
		return err
	}
	p, err := s.ownerPost(services.SourceAPI, req.Source, req.Content, req.ClientKey)
	if err != nil {
		return err
	}
	msg, created, err := s.opts.Chat.Post(c.Request().Context(), p)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return c.JSON(status, wire.PostResponse{Message: s.present(c.Request().Context(), []services.Message{msg})[0], Created: created})
}

func queryID(c echo.Context, name string) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, services.Errorf(services.EINVALID, "query parameter %s: want a non-negative id, got %q", name, v)
	}
	return n, nil
}

func (s *Server) handleTimeline(c echo.Context) error {
	before, err := queryID(c, "before")
	if err != nil {
		return err
	}
	after, err := queryID(c, "after")
	if err != nil {
		return err
	}
	limit := 50
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return services.Errorf(services.EINVALID, "query parameter limit: want 1 to 500, got %q", v)
		}
	}
	hasAfter := c.QueryParam("after") != ""
	if before > 0 && hasAfter {
		return services.Errorf(services.EINVALID, "give before or after, not both")
	}
	var page services.TimelinePage
	if hasAfter {
		// after=0 reads from the beginning, not the newest page.
		page, err = s.opts.Chat.TimelineAfter(c.Request().Context(), s.opts.OwnerTimeline, after, limit)
	} else {
		page, err = s.opts.Chat.Timeline(c.Request().Context(), s.opts.OwnerTimeline, before, 0, limit)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.Page{Messages: s.present(c.Request().Context(), page.Messages), HasOlder: page.HasOlder})
}

func (s *Server) handleWhoami(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"timeline": s.opts.OwnerTimeline, "flags": s.opts.Flags.Map(),
		"model": s.opts.Model, "provider": s.opts.Provider, "max_message_bytes": s.opts.MaxMessageBytes})
}

// wireEvent is the client's form of an internal event.
func wireEvent(e *services.Event) *wire.Event {
	if e == nil {
		return nil
	}
	return &wire.Event{Type: e.Type, Timeline: e.TimelineScope, ID: e.ID, RunID: e.RunID, Data: e.Data}
}
