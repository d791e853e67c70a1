package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// handleBudget is GET /api/budget: each kind's budget and spend today (in
// the owner's zone, with when it resets) and the spend of the last 7 days
// (docs/OPERATIONS.md, "Budgets").
func (s *Server) handleBudget(c echo.Context) error {
	if s.opts.Budgets == nil {
		return services.Errorf(services.EUNAVAILABLE, "budgets are not available on this server")
	}
	r, err := s.opts.Budgets.Report(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}
