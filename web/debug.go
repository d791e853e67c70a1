package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// DebugSource is what the owner's debug page reads: runs and their steps in
// every scope (sub-agent steps included, which no prompt ever sees), summary
// cursors and segments.
type DebugSource interface {
	// ListRuns lists runs newest first.
	ListRuns(ctx context.Context, q services.RunQuery) ([]services.Run, error)
	// GetRun returns one run; ENOTFOUND when absent.
	GetRun(ctx context.Context, id int64) (services.Run, error)
	// ListSteps returns a run's steps in order.
	ListSteps(ctx context.Context, runID int64) ([]services.Step, error)
	// SummaryCursors lists the cursors of a timeline (all when empty).
	SummaryCursors(ctx context.Context, timelineScope string) ([]services.SummaryCursor, error)
	// ListSegments returns the summary segments of (timeline, scope) after
	// the last reset, oldest first.
	ListSegments(ctx context.Context, timelineScope, scope string) ([]services.Segment, error)
	// ListRunRequests lists the stored model requests of a run or of a
	// (timeline, context scope), newest first, without their bodies.
	ListRunRequests(ctx context.Context, q services.RunRequestQuery) ([]services.RunRequest, error)
	// GetRunRequest returns one stored request with its gzip body.
	GetRunRequest(ctx context.Context, id int64) (services.RunRequest, error)
}

// debugSource is Options.Debug; without one the debug API answers 503.
func (s *Server) debugSource() (DebugSource, error) {
	if s.opts.Debug != nil {
		return s.opts.Debug, nil
	}
	return nil, services.Errorf(services.EUNAVAILABLE, "the debug API is not configured on this server")
}

// registerDebugRoutes adds the owner's debug page and its JSON API.
func (s *Server) registerDebugRoutes(e *echo.Echo, api *echo.Group) {
	e.GET("/debug", s.handleDebugPage)
	api.GET("/debug/flags", s.handleDebugFlags)
	api.GET("/debug/runs", s.handleDebugRuns)
	api.GET("/debug/runs/:id", s.handleDebugRun)
	api.GET("/debug/summaries", s.handleDebugSummaries)
	api.GET("/debug/segments", s.handleDebugSegments)
	api.GET("/debug/requests", s.handleDebugRequests)
	api.GET("/debug/requests/:id", s.handleDebugRequest)
	api.GET("/debug/audit", s.handleDebugAudit)
}

// DebugRequest is a stored model request in a listing (its body is GET
// /api/debug/requests/:id).
type DebugRequest struct {
	ID           int64     `json:"id"`
	RunID        int64     `json:"run_id"`
	StepIndex    int       `json:"step_index"`
	Timeline     string    `json:"timeline"`
	ContextScope string    `json:"context_scope"`
	Provider     string    `json:"provider"`
	Model        string    `json:"model"`
	URL          string    `json:"url"`
	Bytes        int       `json:"bytes"`
	CreatedAt    time.Time `json:"created_at"`
}

// handleDebugRequests lists stored requests: ?run=ID, or ?timeline=T&context_scope=S.
func (s *Server) handleDebugRequests(c echo.Context) error {
	src, err := s.debugSource()
	if err != nil {
		return err
	}
	q := services.RunRequestQuery{TimelineScope: c.QueryParam("timeline"), ContextScope: c.QueryParam("context_scope"), Limit: 100}
	if q.RunID, err = debugQueryInt(c, "run"); err != nil {
		return err
	}
	if q.BeforeID, err = debugQueryInt(c, "before"); err != nil {
		return err
	}
	if q.RunID == 0 && (q.TimelineScope == "" || q.ContextScope == "") {
		return services.Errorf(services.EINVALID, "give run, or timeline and context_scope")
	}
	if len(q.TimelineScope) > 200 || len(q.ContextScope) > 200 {
		return services.Errorf(services.EINVALID, "timeline and context_scope are at most 200 characters")
	}
	list, err := src.ListRunRequests(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := make([]DebugRequest, 0, len(list))
	for _, r := range list {
		out = append(out, DebugRequest{ID: r.ID, RunID: r.RunID, StepIndex: r.StepIndex, Timeline: r.TimelineScope, ContextScope: r.ContextScope,
			Provider: r.Provider, Model: r.Model, URL: r.URL, Bytes: r.Bytes, CreatedAt: r.CreatedAt})
	}
	return c.JSON(http.StatusOK, map[string]any{"requests": out})
}

// handleDebugRequest answers one stored request's body: the exact JSON
// the provider was sent.
func (s *Server) handleDebugRequest(c echo.Context) error {
	src, err := s.debugSource()
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return services.Errorf(services.EINVALID, "request id must be a positive number, got %q", c.Param("id"))
	}
	r, err := src.GetRunRequest(c.Request().Context(), id)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.Gzip))
	if err != nil {
		return services.Errorf(services.EINTERNAL, "stored request %d is not gzip: %v", id, err)
	}
	body, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return services.Errorf(services.EINTERNAL, "stored request %d cannot be read: %v", id, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "application/json", body)
}

func (s *Server) handleDebugPage(c echo.Context) error {
	if s.authOf(c) == authNone {
		return c.Redirect(http.StatusFound, "/login")
	}
	b, err := staticFS.ReadFile("static/debug.html")
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
	return c.HTMLBlob(http.StatusOK, b)
}

// DebugRun is a run as the debug API shows it.
type DebugRun struct {
	ID                    int64              `json:"id"`
	Timeline              string             `json:"timeline"`
	ContextScope          string             `json:"context_scope"`
	AgentID               string             `json:"agent_id,omitempty"`
	ParentRunID           int64              `json:"parent_run_id,omitempty"`
	TriggerMessageID      int64              `json:"trigger_message_id,omitempty"`
	Source                services.Source    `json:"source"`
	Status                services.RunStatus `json:"status"`
	Model                 string             `json:"model"`
	StartedAt             time.Time          `json:"started_at"`
	FinishedAt            *time.Time         `json:"finished_at,omitempty"`
	HeartbeatAt           *time.Time         `json:"heartbeat_at,omitempty"`
	DurationMS            *int64             `json:"duration_ms,omitempty"`
	Error                 string             `json:"error,omitempty"`
	PromptTokenBudget     int                `json:"prompt_token_budget"`
	EstimatedPromptTokens int                `json:"estimated_prompt_tokens"`
	ModelContextWindow    int                `json:"model_context_window"`
	PromptTokens          int                `json:"prompt_tokens"`
	CompletionTokens      int                `json:"completion_tokens"`
	CachedTokens          int                `json:"cached_tokens"`
	// TaintedBy is the origin that tainted the run ("" while untainted).
	TaintedBy string `json:"tainted_by,omitempty"`
}

func debugRun(r services.Run) DebugRun {
	out := DebugRun{ID: r.ID, Timeline: r.TimelineScope, ContextScope: r.ContextScope, AgentID: r.AgentID,
		ParentRunID: r.ParentRunID, TriggerMessageID: r.TriggerMessageID, Source: r.Source, Status: r.Status,
		Model: r.Model, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, HeartbeatAt: r.HeartbeatAt, Error: r.Error,
		PromptTokenBudget: r.PromptTokenBudget, EstimatedPromptTokens: r.EstimatedPromptTokens,
		ModelContextWindow: r.ModelContextWindow, PromptTokens: r.PromptTokens,
		CompletionTokens: r.CompletionTokens, CachedTokens: r.CachedTokens, TaintedBy: r.TaintedBy}
	if r.FinishedAt != nil {
		ms := r.FinishedAt.Sub(r.StartedAt).Milliseconds()
		out.DurationMS = &ms
	}
	return out
}

func debugRuns(rs []services.Run) []DebugRun {
	out := make([]DebugRun, 0, len(rs))
	for _, r := range rs {
		out = append(out, debugRun(r))
	}
	return out
}

// DebugStep is one recorded step; Payload is the step's JSON as stored.
type DebugStep struct {
	ID        int64             `json:"id"`
	Index     int               `json:"index"`
	Kind      services.StepKind `json:"kind"`
	Payload   json.RawMessage   `json:"payload"`
	CreatedAt time.Time         `json:"created_at"`
}

// DebugRunDetail is GET /api/debug/runs/:id: the run, its parent and
// children, its steps, and its prompt inspection (the payload of its
// "prompt" step: layers, trims, warnings, prefix hash), null when none.
type DebugRunDetail struct {
	Run      DebugRun        `json:"run"`
	Parent   *DebugRun       `json:"parent"`
	Children []DebugRun      `json:"children"`
	Steps    []DebugStep     `json:"steps"`
	Prompt   json.RawMessage `json:"prompt"`
}

func (s *Server) handleDebugFlags(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"flags": s.opts.Flags.Map(), "owner_timeline": s.opts.OwnerTimeline})
}

func (s *Server) handleDebugRuns(c echo.Context) error {
	src, err := s.debugSource()
	if err != nil {
		return err
	}
	q := services.RunQuery{
		TimelineScope: c.QueryParam("timeline"),
		ContextScope:  c.QueryParam("context_scope"),
		Status:        services.RunStatus(c.QueryParam("status")),
		Limit:         100,
	}
	if q.ParentRunID, err = debugQueryInt(c, "parent"); err != nil {
		return err
	}
	if q.BeforeID, err = debugQueryInt(c, "before"); err != nil {
		return err
	}
	if n, err := debugQueryInt(c, "limit"); err != nil {
		return err
	} else if n > 0 {
		q.Limit = int(min(n, 500))
	}
	for name, v := range map[string]string{"timeline": q.TimelineScope, "context_scope": q.ContextScope, "status": string(q.Status)} {
		if len(v) > 200 {
			return services.Errorf(services.EINVALID, "%s is over 200 characters", name)
		}
	}
	runs, err := src.ListRuns(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"runs": debugRuns(runs)})
}

func (s *Server) handleDebugRun(c echo.Context) error {
	src, err := s.debugSource()
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return services.Errorf(services.EINVALID, "run id must be a positive number, got %q", c.Param("id"))
	}
	ctx := c.Request().Context()
	run, err := src.GetRun(ctx, id)
	if err != nil {
		return err
	}
	out := DebugRunDetail{Run: debugRun(run), Steps: []DebugStep{}, Prompt: json.RawMessage("null")}
	if run.ParentRunID != 0 {
		p, err := src.GetRun(ctx, run.ParentRunID)
		if err != nil && !services.IsKind(err, services.ENOTFOUND) {
			return err
		}
		if err == nil {
			pj := debugRun(p)
			out.Parent = &pj
		}
	}
	children, err := src.ListRuns(ctx, services.RunQuery{ParentRunID: run.ID, Limit: 500})
	if err != nil {
		return err
	}
	out.Children = debugRuns(children)
	steps, err := src.ListSteps(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, st := range steps {
		payload := st.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("{}")
		}
		out.Steps = append(out.Steps, DebugStep{ID: st.ID, Index: st.Index, Kind: st.Kind, Payload: payload, CreatedAt: st.CreatedAt})
		if st.Kind == services.StepPrompt && string(out.Prompt) == "null" {
			out.Prompt = payload
		}
	}
	return c.JSON(http.StatusOK, out)
}

// debugCursor is services.SummaryCursor in JSON.
type debugCursor struct {
	Timeline       string    `json:"timeline"`
	Scope          string    `json:"scope"`
	UntilMessageID int64     `json:"until_message_id"`
	Summary        string    `json:"summary"`
	LagMessages    int64     `json:"lag_messages"`
	LagTokens      int64     `json:"lag_tokens"`
	UpdatedAt      time.Time `json:"updated_at"`
}

func (s *Server) handleDebugSummaries(c echo.Context) error {
	src, err := s.debugSource()
	if err != nil {
		return err
	}
	cursors, err := src.SummaryCursors(c.Request().Context(), c.QueryParam("timeline"))
	if err != nil {
		return err
	}
	out := make([]debugCursor, 0, len(cursors))
	for _, sc := range cursors {
		out = append(out, debugCursor{Timeline: sc.TimelineScope, Scope: sc.Scope, UntilMessageID: sc.UntilMessageID,
			Summary: sc.SummaryText, LagMessages: sc.LagMessages, LagTokens: sc.LagTokens, UpdatedAt: sc.UpdatedAt})
	}
	return c.JSON(http.StatusOK, map[string]any{"cursors": out})
}

// debugSegment is services.Segment in JSON.
type debugSegment struct {
	ID             int64     `json:"id"`
	Kind           string    `json:"kind"`
	FromMessageID  int64     `json:"from_message_id"`
	UntilMessageID int64     `json:"until_message_id"`
	Summary        string    `json:"summary"`
	TokenCount     int       `json:"token_count"`
	Focus          string    `json:"focus,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

func (s *Server) handleDebugSegments(c echo.Context) error {
	src, err := s.debugSource()
	if err != nil {
		return err
	}
	tl, scope := c.QueryParam("timeline"), c.QueryParam("scope")
	if tl == "" || scope == "" {
		return services.Errorf(services.EINVALID, "timeline and scope are required")
	}
	segs, err := src.ListSegments(c.Request().Context(), tl, scope)
	if err != nil {
		return err
	}
	out := make([]debugSegment, 0, len(segs))
	for _, sg := range segs {
		out = append(out, debugSegment{ID: sg.ID, Kind: sg.Kind, FromMessageID: sg.FromMessageID, UntilMessageID: sg.UntilMessageID,
			Summary: sg.SummaryText, TokenCount: sg.TokenCount, Focus: sg.Focus, CreatedAt: sg.CreatedAt})
	}
	return c.JSON(http.StatusOK, map[string]any{"segments": out})
}

// debugQueryInt parses an optional non-negative integer query parameter.
func debugQueryInt(c echo.Context, name string) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, services.Errorf(services.EINVALID, "%s must be a non-negative number, got %q", name, v)
	}
	return n, nil
}
