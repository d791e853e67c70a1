package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// RequestObserver hears about every answered request (Prometheus counters).
type RequestObserver interface {
	// ObserveRequest is called once per request with the matched route
	// pattern ("" when none matched), never the raw path.
	ObserveRequest(method, route string, status int, d time.Duration)
}

// WebsocketObserver hears about websocket connections opening and closing
// (the open-connections gauge).
type WebsocketObserver interface {
	WebsocketOpened()
	WebsocketClosed()
}

// Metrics is what Options.Metrics mounts at GET /metrics.
type Metrics struct {
	// Handler serves the exposition (promhttp); nil answers 404.
	Handler http.Handler
	// Requests counts requests; nil counts none.
	Requests RequestObserver
	// Websockets counts open websockets; nil counts none.
	Websockets WebsocketObserver
}

// registerMetricsRoutes adds GET /metrics. It needs the owner's credentials
// or the scrape token; it is never public, since counts by channel and the
// queue depth tell a stranger when the owner is active.
func (s *Server) registerMetricsRoutes(e *echo.Echo) {
	e.GET("/metrics", s.handleMetrics)
}

func (s *Server) handleMetrics(c echo.Context) error {
	m := s.opts.Metrics
	r := c.Request()
	if s.authOf(c) == authNone && !scrapeTokenOK(r, s.opts.ScrapeTokenHash) {
		return c.JSON(http.StatusUnauthorized, errorBody{Error: "unauthorized"})
	}
	if m.Handler == nil {
		return echo.ErrNotFound
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	m.Handler.ServeHTTP(c.Response(), r)
	return nil
}

func scrapeTokenOK(r *http.Request, hash []byte) bool {
	if len(hash) != sha256.Size {
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], hash) == 1
}
