package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// PairingView is a Telegram user's pairing as the owner sees it. Pending
// pairings do not show their code: the owner types the code the user was
// given, so nobody is approved by a stray click.
type PairingView struct {
	UserID     int64      `json:"user_id"`
	Name       string     `json:"name"`
	Timeline   string     `json:"timeline"`
	ExpiresAt  time.Time  `json:"expires_at"`
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
}

// Pairings lists and approves Telegram pairings.
type Pairings interface {
	// ListPairings returns approved pairings and unexpired pending ones.
	ListPairings(ctx context.Context) ([]PairingView, error)
	// ApprovePairing approves the pending pairing with code; ENOTFOUND when
	// there is none (unknown, expired or already approved).
	ApprovePairing(ctx context.Context, code string) (PairingView, error)
}

// registerPairingRoutes adds the pairing page and API and the Telegram
// webhook. The webhook authenticates with Telegram's secret token header,
// not the owner's credentials.
func (s *Server) registerPairingRoutes(e *echo.Echo, api *echo.Group) {
	e.GET("/pairings", s.handlePairingsPage)
	e.POST("/telegram/webhook", s.handleTelegramWebhook)
	api.GET("/pairings", s.handleListPairings)
	api.POST("/pairings/approve", s.handleApprovePairing)
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

// PairingsResponse is GET /api/pairings's body.
type PairingsResponse struct {
	Enabled  bool          `json:"enabled"`
	Pending  []PairingView `json:"pending"`
	Approved []PairingView `json:"approved"`
}

func (s *Server) handleListPairings(c echo.Context) error {
	p := s.opts.Pairings
	out := PairingsResponse{Pending: []PairingView{}, Approved: []PairingView{}}
	if p == nil {
		return c.JSON(http.StatusOK, out)
	}
	list, err := p.ListPairings(c.Request().Context())
	if err != nil {
		return err
	}
	out.Enabled = true
	for _, v := range list {
		if v.ApprovedAt != nil {
			out.Approved = append(out.Approved, v)
		} else {
			out.Pending = append(out.Pending, v)
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
	return c.JSON(http.StatusOK, map[string]any{"pairing": v})
}
