package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// registerApprovalRoutes adds the owner's approvals and the policy in
// force (docs/SECURITY.md): GET /api/approvals, POST /api/approvals/:id
// {"decision":"approve"|"deny"}, GET /api/policy.
func (s *Server) registerApprovalRoutes(api *echo.Group) {
	api.GET("/approvals", s.handleListApprovals)
	api.POST("/approvals/:id", s.handleDecideApproval)
	api.GET("/policy", s.handlePolicy)
}

func (s *Server) approvals() (services.ApprovalDecider, error) {
	if s.opts.Approvals == nil {
		return nil, services.Errorf(services.EUNAVAILABLE, "approvals are not available on this server")
	}
	return s.opts.Approvals, nil
}

// handleListApprovals lists approvals, oldest first; ?state=pending filters.
func (s *Server) handleListApprovals(c echo.Context) error {
	ap, err := s.approvals()
	if err != nil {
		return err
	}
	q := services.ApprovalQuery{State: services.ApprovalState(c.QueryParam("state")), Limit: 200}
	switch q.State {
	case "", services.ApprovalPending, services.ApprovalApproved, services.ApprovalDenied, services.ApprovalTimedOut,
		services.ApprovalCancelled, services.ApprovalExecuting, services.ApprovalExecuted, services.ApprovalInterrupted:
	default:
		return services.Errorf(services.EINVALID, "state %q: want pending, approved, denied, timed_out, cancelled, executing, executed or interrupted", q.State)
	}
	list, err := ap.ListApprovals(c.Request().Context(), q)
	if err != nil {
		return err
	}
	if list == nil {
		list = []services.Approval{}
	}
	return c.JSON(http.StatusOK, map[string]any{"approvals": list})
}

type decisionBody struct {
	Decision string `json:"decision"`
	// Source is the client that decides: the chat page says web, the
	// TUI tui; empty: api.
	Source string `json:"source"`
}

// handleDecideApproval decides one approval; 409 when it was already decided.
func (s *Server) handleDecideApproval(c echo.Context) error {
	ap, err := s.approvals()
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return services.Errorf(services.EINVALID, "approval id %q is not a positive number", c.Param("id"))
	}
	var body decisionBody
	if err := c.Bind(&body); err != nil {
		return services.Errorf(services.EINVALID, "body: want {\"decision\":\"approve\"|\"deny\"}")
	}
	if body.Decision != "approve" && body.Decision != "deny" {
		return services.Errorf(services.EINVALID, "decision %q: want approve or deny", body.Decision)
	}
	channel := services.SourceAPI
	switch services.Source(body.Source) {
	case "":
	case services.SourceWeb, services.SourceTUI:
		channel = services.Source(body.Source)
	default:
		return services.Errorf(services.EINVALID, "source %q: want web, tui or none", body.Source)
	}
	a, err := ap.DecideApproval(c.Request().Context(), id, body.Decision == "approve", string(channel))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Server) handlePolicy(c echo.Context) error {
	ap, err := s.approvals()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ap.Policy().View())
}
