package web

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/contextmgr"
)

// PromptInspector shows how prompts are compiled (the agent runtime).
type PromptInspector interface {
	// LastPrompt is the inspection of the timeline's last main prompt and its run id.
	LastPrompt(ctx context.Context, timeline string) (contextmgr.Inspection, int64, error)
	// PreviewPrompt builds the next main prompt without an input.
	PreviewPrompt(ctx context.Context, timeline string) (contextmgr.Inspection, error)
}

// registerContextRoutes: prompt inspection, the owner's rules and the
// remembered settings of the owner's timeline.
func (s *Server) registerContextRoutes(api *echo.Group) {
	api.GET("/context", s.handleContext)
	api.GET("/rules", s.handleListRules)
	api.POST("/rules", s.handleCreateRule)
	api.PUT("/rules/:id", s.handleUpdateRule)
	api.DELETE("/rules/:id", s.handleDeleteRule)
	api.GET("/memory", s.handleListMemory)
	api.PUT("/memory", s.handlePutMemory)
	api.DELETE("/memory/:id", s.handleDeleteMemory)
}

func (s *Server) needContext() error {
	if s.opts.ContextStore == nil || s.opts.Inspector == nil {
		return services.Errorf(services.EUNAVAILABLE, "the context API is not configured on this server")
	}
	return nil
}

func (s *Server) handleContext(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	last, runID, err := s.opts.Inspector.LastPrompt(ctx, s.opts.OwnerTimeline)
	if err != nil {
		return err
	}
	next, err := s.opts.Inspector.PreviewPrompt(ctx, s.opts.OwnerTimeline)
	if err != nil {
		return err
	}
	out := map[string]any{"next": next}
	if runID != 0 {
		out["last"], out["last_run_id"] = last, runID
	}
	return c.JSON(http.StatusOK, out)
}

func pathID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, services.Errorf(services.EINVALID, "id %q: want a positive number", c.Param("id"))
	}
	return id, nil
}

func queryVersion(c echo.Context) (int, error) {
	v, err := strconv.Atoi(c.QueryParam("version"))
	if err != nil || v <= 0 {
		return 0, services.Errorf(services.EINVALID, "query parameter version: want the item's current version (a positive number)")
	}
	return v, nil
}

// RuleJSON is a rule in the API.
type RuleJSON struct {
	ID      int64  `json:"id,omitempty"`
	Text    string `json:"text"`
	Hard    *bool  `json:"hard,omitempty"`
	Version int    `json:"version,omitempty"`
}

func ruleJSON(r services.Constraint) RuleJSON {
	h := r.Hard
	return RuleJSON{ID: r.ID, Text: r.Text, Hard: &h, Version: r.Version}
}

func (s *Server) handleListRules(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	cs, err := s.opts.ContextStore.ListConstraints(c.Request().Context(), s.opts.OwnerTimeline)
	if err != nil {
		return err
	}
	out := make([]RuleJSON, 0, len(cs))
	for _, r := range cs {
		out = append(out, ruleJSON(r))
	}
	return c.JSON(http.StatusOK, map[string]any{"rules": out})
}

func (s *Server) handleCreateRule(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	var in RuleJSON
	if err := decodeJSON(c.Request(), &in); err != nil {
		return err
	}
	hard := in.Hard == nil || *in.Hard
	r, err := s.opts.ContextStore.CreateConstraint(c.Request().Context(), services.Constraint{TimelineScope: s.opts.OwnerTimeline, Text: in.Text, Hard: hard})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, ruleJSON(r))
}

func (s *Server) handleUpdateRule(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in RuleJSON
	if err := decodeJSON(c.Request(), &in); err != nil {
		return err
	}
	if in.Version <= 0 {
		return services.Errorf(services.EINVALID, "field \"version\": the rule's current version is required")
	}
	hard := in.Hard == nil || *in.Hard
	r, err := s.opts.ContextStore.UpdateConstraint(c.Request().Context(), services.Constraint{ID: id, TimelineScope: s.opts.OwnerTimeline, Text: in.Text, Hard: hard, Version: in.Version})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ruleJSON(r))
}

func (s *Server) handleDeleteRule(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	v, err := queryVersion(c)
	if err != nil {
		return err
	}
	if err := s.opts.ContextStore.DeleteConstraint(c.Request().Context(), s.opts.OwnerTimeline, id, v); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// MemoryJSON is a remembered setting in the API.
type MemoryJSON struct {
	ID         int64    `json:"id,omitempty"`
	Key        string   `json:"key"`
	Value      string   `json:"value"`
	Confidence *float64 `json:"confidence,omitempty"`
	Source     string   `json:"source,omitempty"`
	Version    int      `json:"version,omitempty"`
}

func (s *Server) handleListMemory(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	items, err := s.opts.ContextStore.ListMemory(c.Request().Context(), s.opts.OwnerTimeline)
	if err != nil {
		return err
	}
	out := make([]MemoryJSON, 0, len(items))
	for _, m := range items {
		conf := m.Confidence
		out = append(out, MemoryJSON{ID: m.ID, Key: m.Key, Value: m.Value, Confidence: &conf, Source: m.Source, Version: m.Version})
	}
	return c.JSON(http.StatusOK, map[string]any{"memory": out})
}

func (s *Server) handlePutMemory(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	var in MemoryJSON
	if err := decodeJSON(c.Request(), &in); err != nil {
		return err
	}
	conf := 1.0 // set by the owner: certain
	if in.Confidence != nil {
		conf = *in.Confidence
	}
	m, err := s.opts.ContextStore.UpsertMemory(c.Request().Context(), services.MemoryItem{TimelineScope: s.opts.OwnerTimeline,
		Key: in.Key, Value: in.Value, Confidence: conf, Source: "owner", Version: in.Version})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, MemoryJSON{ID: m.ID, Key: m.Key, Value: m.Value, Confidence: &m.Confidence, Source: m.Source, Version: m.Version})
}

func (s *Server) handleDeleteMemory(c echo.Context) error {
	if err := s.needContext(); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	v, err := queryVersion(c)
	if err != nil {
		return err
	}
	if err := s.opts.ContextStore.DeleteMemory(c.Request().Context(), s.opts.OwnerTimeline, id, v); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
