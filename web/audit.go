package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// AuditTrail is Options.Audit: where the server records the owner's logins,
// logouts, pairing decisions and rule and schedule changes, and what the
// debug page lists.
type AuditTrail interface {
	services.AuditLog
	services.AuditPager
}

// auditChannel is the channel of a request: the page (a session cookie) or
// an API client (the bearer token).
func (s *Server) auditChannel(c echo.Context) string {
	if s.authOf(c) == authBearer {
		return "api"
	}
	return "web"
}

// audit appends e to the audit trail (nothing without Options.Audit). The
// change it records is already made, so a failure is logged, not answered.
func (s *Server) audit(ctx context.Context, e services.AuditEntry) {
	if s.opts.Audit == nil {
		return
	}
	if e.TimelineScope == "" && (e.Action == services.AuditRuleChange || e.Action == services.AuditScheduleChange) {
		e.TimelineScope = s.opts.OwnerTimeline
	}
	if _, err := s.opts.Audit.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("audit: append failed", "action", e.Action, "subject", e.Subject, "err", err)
	}
}

// auditLogin records an owner login: method is "form" or "link".
func (s *Server) auditLogin(c echo.Context, method string) {
	r := c.Request()
	s.audit(r.Context(), services.AuditEntry{Actor: "owner", Channel: "web", Action: services.AuditLogin, Subject: "owner", Status: "ok",
		Detail: services.AuditDetail(map[string]any{"method": method, "ip": c.RealIP(), "user_agent": cutString(r.UserAgent(), 200)})})
}

// auditLogout records the owner ending a valid session.
func (s *Server) auditLogout(c echo.Context) {
	s.audit(c.Request().Context(), services.AuditEntry{Actor: "owner", Channel: "web", Action: services.AuditLogout, Subject: "owner", Status: "ok"})
}

func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// DebugAuditPage is GET /api/debug/audit: audit rows newest first, and the
// before= value of the next (older) page, 0 when this is the last.
type DebugAuditPage struct {
	Entries    []services.AuditEntry `json:"entries"`
	NextBefore int64                 `json:"next_before"`
}

// handleDebugAudit answers ?before=ID&limit=N (default 50, at most 500).
func (s *Server) handleDebugAudit(c echo.Context) error {
	if s.opts.Audit == nil {
		return services.Errorf(services.EUNAVAILABLE, "the audit trail is not configured on this server")
	}
	before, err := debugQueryInt(c, "before")
	if err != nil {
		return err
	}
	limit, err := debugQueryInt(c, "limit")
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = 50
	}
	limit = min(limit, 500)
	list, err := s.opts.Audit.AuditPage(c.Request().Context(), before, int(limit)+1)
	if err != nil {
		return err
	}
	out := DebugAuditPage{Entries: list}
	if len(list) > int(limit) {
		out.Entries = list[:limit]
		out.NextBefore = list[limit-1].ID
	}
	return c.JSON(http.StatusOK, out)
}

// auditRuleRemoval records a rule removed through DELETE /api/rules/:id.
func (s *Server) auditRuleRemoval(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := next(c); err != nil {
			return err
		}
		id, _ := pathID(c)
		v, _ := queryVersion(c)
		s.audit(c.Request().Context(), services.RuleAudit(s.auditChannel(c), "removed",
			services.Constraint{ID: id, TimelineScope: s.opts.OwnerTimeline, Version: v}))
		return nil
	}
}
