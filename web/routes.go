package web

import (
	"sort"

	"github.com/labstack/echo/v4"
)

// Route is one registered method and path, as echo matches it (":name" and
// "*" are parameters).
type Route struct {
	Method string
	Path   string
	// NotFound marks a group's catch-all for unknown paths under it: it runs
	// the group's middleware (so /api/anything still needs credentials) and
	// answers 404.
	NotFound bool
}

// Routes lists every route the server answers, sorted by path and method, so
// tests can walk the whole surface (a route added later is walked too).
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.echo.Routes() {
		rt := Route{Method: r.Method, Path: r.Path}
		if r.Method == echo.RouteNotFound {
			rt.Method, rt.NotFound = "GET", true
		}
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}
