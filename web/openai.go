package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// OpenAIChannel is the OpenAI-compatible channel (channels/openai), which
// answers in OpenAI's shapes. The server mounts its routes on the /v1 group
// behind the owner's authentication and hands it every error on a /v1
// path — the router's, a middleware's (body limit, rate limit,
// authentication), a handler's — to answer in its shape.
type OpenAIChannel interface {
	// Mount adds the channel's routes (and its own middleware) to g.
	Mount(g *echo.Group)
	// Error answers err for a request under /v1.
	Error(c echo.Context, err error)
}

// isAPIPath reports whether a request is for the OpenAI-compatible API,
// whose every answer, errors included, is in OpenAI's shape.
func isAPIPath(path string) bool { return path == "/v1" || strings.HasPrefix(path, "/v1/") }

// mountOpenAI mounts the OpenAI-compatible channel at /v1, if there is one.
func (s *Server) mountOpenAI(e *echo.Echo) {
	if s.opts.OpenAI != nil {
		s.opts.OpenAI.Mount(e.Group("/v1", s.requireAPIOwner))
	}
}

// requireAPIOwner is requireOwner for /v1: the owner's bearer token (or
// session cookie, same origin only for writes); its refusals reach the
// channel through the error handler.
func (s *Server) requireAPIOwner(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		kind := s.authOf(c)
		if kind == authNone {
			return echo.NewHTTPError(http.StatusUnauthorized, "invalid or missing API key: send it as Authorization: Bearer <key>")
		}
		if kind == authCookie && r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			return echo.NewHTTPError(http.StatusForbidden, "cross-origin request refused")
		}
		return next(c)
	}
}
