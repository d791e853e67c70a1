package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

const (
	sessionCookie = "sb_session"
	sessionTTL    = 30 * 24 * time.Hour
)

// HashToken returns the SHA-256 of a login token, the only form stored.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// NewToken returns a fresh random login token.
func NewToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// auth checks the owner's credentials: a bearer token (API, TUI) or a
// session cookie (browser). Sessions are stateless: an expiry and its HMAC
// keyed by the token's hash, so every instance can check them and a new
// token invalidates them all.
type auth struct {
	tokenHash []byte
	now       func() time.Time
}

func (a *auth) tokenOK(token string) bool {
	if token == "" || len(a.tokenHash) != sha256.Size {
		return false
	}
	return subtle.ConstantTimeCompare(HashToken(token), a.tokenHash) == 1
}

func (a *auth) sign(expiry int64) string {
	m := hmac.New(sha256.New, a.tokenHash)
	m.Write([]byte("session:" + strconv.FormatInt(expiry, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

func (a *auth) newSession() (string, time.Time) {
	exp := a.now().Add(sessionTTL)
	return strconv.FormatInt(exp.Unix(), 10) + "." + a.sign(exp.Unix()), exp
}

func (a *auth) sessionOK(v string) bool {
	expS, mac, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil || a.now().Unix() > exp {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(a.sign(exp)))
}

type authKind int

const (
	authNone authKind = iota
	authBearer
	authCookie
)

func (a *auth) check(r *http.Request) authKind {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && a.tokenOK(strings.TrimSpace(tok)) {
			return authBearer
		}
		return authNone
	}
	if c, err := r.Cookie(sessionCookie); err == nil && a.sessionOK(c.Value) {
		return authCookie
	}
	return authNone
}

// requireOwner rejects requests without the owner's credentials with 401
// and nothing else. Cookie-authenticated writes must also come from this
// origin (CSRF): browsers send Origin on every cross-site POST.
func (s *Server) requireOwner(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		kind := s.auth.check(r)
		if kind == authNone {
			return c.JSON(http.StatusUnauthorized, errorBody{Error: "unauthorized"})
		}
		if kind == authCookie && r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			return c.JSON(http.StatusForbidden, errorBody{Error: "cross-origin request refused"})
		}
		return next(c)
	}
}

func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		// No Origin: only same-origin fetches from old browsers; require the
		// fetch metadata header instead.
		return r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

func (s *Server) setSession(c echo.Context) {
	v, exp := s.auth.newSession()
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: v, Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.opts.SecureCookies,
	})
}

// handleLoginPage shows the login form, or logs in from a ?token= link and
// redirects so the token leaves the address bar.
func (s *Server) handleLoginPage(c echo.Context) error {
	if tok := c.QueryParam("token"); tok != "" {
		if !s.auth.tokenOK(tok) {
			return c.HTML(http.StatusUnauthorized, loginHTML("That login link is not valid."))
		}
		s.setSession(c)
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return c.HTML(http.StatusOK, loginHTML(""))
}

func (s *Server) handleLogin(c echo.Context) error {
	tok := strings.TrimSpace(c.FormValue("token"))
	if !s.auth.tokenOK(tok) {
		return c.HTML(http.StatusUnauthorized, loginHTML("Wrong token."))
	}
	s.setSession(c)
	return c.Redirect(http.StatusSeeOther, "/")
}

func (s *Server) handleLogout(c echo.Context) error {
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return c.Redirect(http.StatusSeeOther, "/login")
}
