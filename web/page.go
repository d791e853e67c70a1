package web

import (
	"embed"
	"html"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/switchboard/switchboard/web/mdhtml"
)

//go:embed static
var staticFS embed.FS

// loginPage is the login form; loginHTML fills in the problem, escaped.
// Plain string building, not html/template: a reachable template Execute
// makes the linker keep every exported method of every type in the binary
// (text/template calls methods by name), which made it ~2x larger and its
// start-up touch more pages (docs/OPERATIONS.md, Memory).
const loginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchboard · log in</title><link rel="stylesheet" href="/static/style.css"></head>
<body class="login"><form method="post" action="/login" class="login-box">
<h1>Switchboard</h1>
<p>Paste the owner token (WEB_AUTH_TOKEN, or the one printed at first start).</p>
%s
<input id="token" name="token" type="password" autocomplete="current-password" placeholder="token" autofocus required>
<button type="submit" id="login">Log in</button>
</form></body></html>`

func loginHTML(problem string) string {
	alert := ""
	if problem != "" {
		alert = `<p class="error" role="alert">` + html.EscapeString(problem) + `</p>`
	}
	return strings.Replace(loginPage, "%s", alert, 1)
}

func (s *Server) handleChatPage(c echo.Context) error {
	if s.authOf(c) == authNone {
		return c.Redirect(http.StatusFound, "/login")
	}
	b, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:")
	return c.HTMLBlob(http.StatusOK, b)
}

// handleStatic serves the embedded CSS and JS (no secrets in them, so no auth).
func (s *Server) handleStatic(c echo.Context) error {
	if c.Param("*") == "code.css" {
		// The highlighted code's classes, from the renderer's style.
		c.Response().Header().Set("Cache-Control", "public, max-age=3600")
		return c.Blob(http.StatusOK, "text/css; charset=utf-8", []byte(mdhtml.CSS()))
	}
	name := path.Clean("static/" + c.Param("*"))
	if !strings.HasPrefix(name, "static/") || strings.HasSuffix(name, ".html") {
		return echo.ErrNotFound
	}
	b, err := fs.ReadFile(staticFS, name)
	if err != nil {
		return echo.ErrNotFound
	}
	ct := "text/plain; charset=utf-8"
	switch path.Ext(name) {
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".js":
		ct = "text/javascript; charset=utf-8"
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, ct, b)
}
