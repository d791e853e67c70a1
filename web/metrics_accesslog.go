package web

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
)

// quietRoutes are polled by machines; their access lines are debug level.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/static/*": true}

// accessLog logs one line per request (method, route pattern, status,
// duration, request id) and feeds the request metrics. It never logs the
// raw path or query string (a login link carries ?token=), headers, bodies
// or cookies. It runs right after the request-id middleware so it sees the
// final status of everything behind it, rate-limit refusals included.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			// Write the error response now so its status is the one logged.
			c.Error(err)
		}
		d := time.Since(start)
		req, res := c.Request(), c.Response()
		route := c.Path()
		if obs := s.opts.Metrics.Requests; obs != nil {
			obs.ObserveRequest(req.Method, route, res.Status, d)
		}
		if route == "" {
			route = "unmatched"
		}
		level := slog.LevelInfo
		switch {
		case res.Status >= 500:
			level = slog.LevelError
		case quietRoutes[route]:
			level = slog.LevelDebug
		}
		s.log.LogAttrs(req.Context(), level, "request",
			slog.String("method", req.Method),
			slog.String("route", route),
			slog.Int("status", res.Status),
			slog.Int64("duration_ms", d.Milliseconds()),
			slog.Int64("bytes_out", res.Size),
			slog.String("request_id", res.Header().Get(echo.HeaderXRequestID)),
		)
		return nil
	}
}
