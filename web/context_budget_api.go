package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// BudgetJSON is the owner's budget profile in the API (docs/CONTEXT.md,
// "Budget profiles"): the profile, and on a GET whose stored profile is
// not valid, the CONTEXT_BUDGET_FALLBACK warning (the layers are then the
// default's, at the stored version, so a PUT at it replaces the profile).
type BudgetJSON struct {
	Version  int                             `json:"version"`
	Layers   map[string]services.LayerBudget `json:"layers"`
	Warnings []WarningJSON                   `json:"warnings,omitempty"`
}

// WarningJSON is a coded warning.
type WarningJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (s *Server) contextBudgets() (services.ContextBudgets, error) {
	if s.opts.ContextBudgets == nil {
		return nil, services.Errorf(services.EUNAVAILABLE, "the budget profile is not configured on this server")
	}
	return s.opts.ContextBudgets, nil
}

func (s *Server) handleGetBudget(c echo.Context) error {
	bs, err := s.contextBudgets()
	if err != nil {
		return err
	}
	b, err := bs.ContextBudget(c.Request().Context(), s.opts.OwnerTimeline)
	out := BudgetJSON{Version: b.Version, Layers: b.Layers}
	if err != nil {
		if services.ErrorCode(err) != services.CodeBudgetFallback {
			return err
		}
		out.Warnings = []WarningJSON{{Code: services.CodeBudgetFallback, Message: services.ErrorMessage(err)}}
	}
	return c.JSON(http.StatusOK, out)
}

// handlePutBudget replaces the profile: the body is the whole profile with
// the version it was read at; 200 with the stored profile (version one
// more), 409 CONTEXT_BUDGET_CONFLICT when it changed since (nothing
// changed), 400 CONTEXT_BUDGET_INVALID naming the problem.
func (s *Server) handlePutBudget(c echo.Context) error {
	bs, err := s.contextBudgets()
	if err != nil {
		return err
	}
	var in struct {
		Version *int                            `json:"version"`
		Layers  map[string]services.LayerBudget `json:"layers"`
	}
	if err := decodeJSON(c.Request(), &in); err != nil {
		return services.CodedErrorf(services.ErrorKind(err), services.CodeBudgetInvalid, "%s", services.ErrorMessage(err))
	}
	if in.Version == nil {
		return services.CodedErrorf(services.EINVALID, services.CodeBudgetInvalid, "field \"version\": the profile's current version is required (0 when none is stored)")
	}
	b, err := bs.PutContextBudget(c.Request().Context(), s.opts.OwnerTimeline, services.ContextBudget{Version: *in.Version, Layers: in.Layers})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, BudgetJSON{Version: b.Version, Layers: b.Layers})
}

// handleBlocks is GET /api/workspace/blocks?path=…: the block tree of a
// file of the owner's workspace (services.FileBlocks): Markdown sections,
// a JSON object's keys, or the whole file; each with the pin selecting it.
func (s *Server) handleBlocks(c echo.Context) error {
	if s.opts.Blocks == nil {
		return services.Errorf(services.EUNAVAILABLE, "workspace blocks are not available on this server")
	}
	p := c.QueryParam("path")
	if strings.TrimSpace(p) == "" {
		return services.Errorf(services.EINVALID, "query parameter path: the workspace file to list (notes.md)")
	}
	fb, err := s.opts.Blocks.Blocks(c.Request().Context(), s.opts.OwnerTimeline, p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, fb)
}
