package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

func pairingView(p services.Pairing) wire.Pairing {
	v := wire.Pairing{UserID: p.UserID, Name: p.DisplayName, Timeline: p.TimelineScope, ExpiresAt: p.ExpiresAt, ApprovedAt: p.ApprovedAt}
	if !p.Approved() {
		v.Code = p.Code
	}
	return v
}

// registerPairingRoutes adds the pairing page and API and the Telegram
// webhook. The webhook authenticates with Telegram's secret token header,
// not the owner's credentials.
func (s *Server) registerPairingRoutes(e *echo.Echo, api *echo.Group) {
	e.GET("/pairings", s.handlePairingsPage)
	e.POST("/telegram/webhook", s.handleTelegramWebhook)
	api.GET("/pairings", s.handleListPairings)
	api.POST("/pairings/approve", s.handleApprovePairing)
	api.POST("/pairings/deny", s.handleDenyPairing)
}

func (s *Server) handlePairingsPage(c echo.Context) error {
	if s.authOf(c) == authNone {
		return c.Redirect(http.StatusFound, "/login")
	}
	b, err := staticFS.ReadFile("static/pairings.html")
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Content-Security-Policy", "default-src 'self'")
	return c.HTMLBlob(http.StatusOK, b)
}

func (s *Server) handleTelegramWebhook(c echo.Context) error {
	wh := s.opts.TelegramWebhook
	if wh == nil {
		return echo.ErrNotFound
	}
	wh.ServeHTTP(c.Response(), c.Request())
	return nil
}

func (s *Server) handleListPairings(c echo.Context) error {
	p := s.opts.Pairings
	out := wire.Pairings{Pending: []wire.Pairing{}, Approved: []wire.Pairing{}}
	if p == nil {
		return c.JSON(http.StatusOK, out)
	}
	list, err := p.ListPairings(c.Request().Context())
	if err != nil {
		return err
	}
	out.Enabled = true
	for _, v := range list {
		if v.Approved() {
			out.Approved = append(out.Approved, pairingView(v))
		} else {
			out.Pending = append(out.Pending, pairingView(v))
		}
	}
	return c.JSON(http.StatusOK, out)
}

// ApprovePairingRequest is POST /api/pairings/approve's body.
type ApprovePairingRequest struct {
	Code string `json:"code"`
}

func (s *Server) handleApprovePairing(c echo.Context) error {
	var req ApprovePairingRequest
	if err := decodeJSON(c.Request(), &req); err != nil {
		return err
	}
	if req.Code == "" || len(req.Code) > 32 {
		return services.Errorf(services.EINVALID, "code is required (the 6 characters the Telegram user was given)")
	}
	p := s.opts.Pairings
	if p == nil {
		return services.Errorf(services.ENOTFOUND, "the Telegram channel is not configured")
	}
	v, err := p.ApprovePairing(c.Request().Context(), req.Code)
	if err != nil {
		return err
	}
	s.audit(c.Request().Context(), services.PairingAudit(s.auditChannel(c), "approved", v))
	return c.JSON(http.StatusOK, map[string]any{"pairing": pairingView(v)})
}

// handleDenyPairing is POST /api/pairings/deny {"code":"…"}: the pending
// request's code stops working and the stranger is told (the Desk).
func (s *Server) handleDenyPairing(c echo.Context) error {
	var req ApprovePairingRequest
	if err := decodeJSON(c.Request(), &req); err != nil {
		return err
	}
	if req.Code == "" || len(req.Code) > 32 {
		return services.Errorf(services.EINVALID, "code is required (the 6 characters the Telegram user was given)")
	}
	p := s.opts.Pairings
	if p == nil {
		return services.Errorf(services.ENOTFOUND, "the Telegram channel is not configured")
	}
	v, err := p.DenyPairing(c.Request().Context(), req.Code)
	if err != nil {
		return err
	}
	s.audit(c.Request().Context(), services.PairingAudit(s.auditChannel(c), "denied", v))
	return c.JSON(http.StatusOK, map[string]any{"pairing": pairingView(v)})
}
