// Package web is Switchboard's HTTP face on echo: REST API, websocket hub,
// owner auth, and the embedded chat and debug pages. It speaks to services
// only through their interfaces and never touches SQL or prompts.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Options configures a Server.
type Options struct {
	Logger *slog.Logger
	// Ready reports whether the service can take traffic (database reachable,
	// migrations current); nil means always ready.
	Ready func(ctx context.Context) error
}

// Server is the web server.
type Server struct {
	echo *echo.Echo
	opts Options
	http *http.Server
}

// New builds the server and its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	s := &Server{echo: e, opts: opts}
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	return s
}

// Handler returns the root handler (for tests with httptest).
func (s *Server) Handler() http.Handler { return s.echo }

// Serve accepts connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	s.http = &http.Server{Handler: s.echo, ReadHeaderTimeout: 10 * time.Second}
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.http == nil {
		return nil
	}
	return s.http.Shutdown(ctx)
}

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(c echo.Context) error {
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.opts.Ready(ctx); err != nil {
			c.Response().Header().Set("Retry-After", "5")
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": err.Error()})
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
