package web

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// registerContextRoutes: prompt inspection, the owner's rules and the
// remembered settings of the owner's timeline.
func (s *Server) registerContextRoutes(api *echo.Group) {
	g := api.Group("", s.requireContext)
	g.GET("/context", s.handleContext)
	g.GET("/context/preview", s.handleContextPreview)
	g.GET("/context/manifest", s.handleGetManifest)
	g.PUT("/context/manifest", s.handlePutManifest)
	g.GET("/context/budget", s.handleGetBudget)
	g.PUT("/context/budget", s.handlePutBudget)
	g.GET("/workspace/blocks", s.handleBlocks)
	g.GET("/rules", s.handleListRules)
	g.POST("/rules", s.handleCreateRule)
	g.PUT("/rules/:id", s.handleUpdateRule)
	g.DELETE("/rules/:id", s.auditRuleRemoval(s.versionedDelete(func(st services.ContextStore) deleteFunc { return st.DeleteConstraint })))
	g.GET("/memory", s.handleListMemory)
	g.PUT("/memory", s.handlePutMemory)
	g.DELETE("/memory/:id", s.versionedDelete(func(st services.ContextStore) deleteFunc { return st.DeleteMemory }))
}

// requireContext answers 503 when the server runs without the context API.
func (s *Server) requireContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.ContextStore == nil || s.opts.Inspector == nil {
			return services.Errorf(services.EUNAVAILABLE, "the context API is not configured on this server")
		}
		return next(c)
	}
}

type deleteFunc func(ctx context.Context, timelineScope string, id int64, version int) error

// versionedDelete is DELETE …/:id?version=N for a versioned item of the
// owner's timeline: 204, or 404 / 409 CONTEXT_BUDGET_CONFLICT.
func (s *Server) versionedDelete(pick func(services.ContextStore) deleteFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := pathID(c)
		if err != nil {
			return err
		}
		v, err := queryVersion(c)
		if err != nil {
			return err
		}
		if err := pick(s.opts.ContextStore)(c.Request().Context(), s.opts.OwnerTimeline, id, v); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}

func (s *Server) handleContext(c echo.Context) error {
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

// handleContextPreview is the next prompt of the owner's timeline as the
// model would get it (services.PromptInspector.ExplainPrompt); no model is
// called.
func (s *Server) handleContextPreview(c echo.Context) error {
	pv, err := s.opts.Inspector.ExplainPrompt(c.Request().Context(), s.opts.OwnerTimeline)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, pv)
}

func (s *Server) manifests() (services.ContextManifests, error) {
	if s.opts.Manifests == nil {
		return nil, services.Errorf(services.EUNAVAILABLE, "the context manifest is not configured on this server")
	}
	return s.opts.Manifests, nil
}

func (s *Server) handleGetManifest(c echo.Context) error {
	ms, err := s.manifests()
	if err != nil {
		return err
	}
	m, err := ms.ContextManifest(c.Request().Context(), s.opts.OwnerTimeline)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// handlePutManifest replaces the manifest: the body is the manifest with
// the version it was read at; 200 with the stored manifest (version one
// more), 409 CONTEXT_MANIFEST_CONFLICT when it changed since, 400 naming
// the problem for an invalid manifest or a pin the workspace lacks.
func (s *Server) handlePutManifest(c echo.Context) error {
	ms, err := s.manifests()
	if err != nil {
		return err
	}
	var in struct {
		Version *int           `json:"version"`
		Pins    []services.Pin `json:"pins"`
	}
	if err := decodeJSON(c.Request(), &in); err != nil {
		return services.CodedErrorf(services.ErrorKind(err), services.CodeManifestInvalid, "%s", services.ErrorMessage(err))
	}
	if in.Version == nil {
		return services.CodedErrorf(services.EINVALID, services.CodeManifestInvalid, "field \"version\": the manifest's current version is required (0 when there is none yet)")
	}
	m, err := ms.PutContextManifest(c.Request().Context(), s.opts.OwnerTimeline, services.ContextManifest{Version: *in.Version, Pins: in.Pins})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
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
	ID   int64  `json:"id,omitempty"`
	Text string `json:"text"`
	Hard *bool  `json:"hard,omitempty"`
	// Check is a hard rule's check pattern (a Go regexp; docs/CONTEXT.md).
	Check   string `json:"check,omitempty"`
	Version int    `json:"version,omitempty"`
}

func ruleJSON(r services.Constraint) RuleJSON {
	h := r.Hard
	return RuleJSON{ID: r.ID, Text: r.Text, Hard: &h, Check: r.Check, Version: r.Version}
}

func (s *Server) handleListRules(c echo.Context) error {
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
	var in RuleJSON
	if err := decodeJSON(c.Request(), &in); err != nil {
		return err
	}
	hard := in.Hard == nil || *in.Hard
	r, err := s.opts.ContextStore.CreateConstraint(c.Request().Context(), services.Constraint{TimelineScope: s.opts.OwnerTimeline, Text: in.Text, Hard: hard, Check: in.Check})
	if err != nil {
		return err
	}
	s.audit(c.Request().Context(), services.RuleAudit(s.auditChannel(c), "added", r))
	return c.JSON(http.StatusCreated, ruleJSON(r))
}

func (s *Server) handleUpdateRule(c echo.Context) error {
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
	r, err := s.opts.ContextStore.UpdateConstraint(c.Request().Context(), services.Constraint{ID: id, TimelineScope: s.opts.OwnerTimeline, Text: in.Text, Hard: hard, Check: in.Check, Version: in.Version})
	if err != nil {
		return err
	}
	s.audit(c.Request().Context(), services.RuleAudit(s.auditChannel(c), "changed", r))
	return c.JSON(http.StatusOK, ruleJSON(r))
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
