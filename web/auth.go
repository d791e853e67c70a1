package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
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

// SessionStore keeps the owner's browser sessions by the SHA-256 of their
// random id: a copy of the store cannot be turned into a cookie.
type SessionStore interface {
	// CreateSession stores a session until expires.
	CreateSession(ctx context.Context, idHash []byte, expires time.Time) error
	// SessionValid reports whether an unexpired session has this hash.
	SessionValid(ctx context.Context, idHash []byte) (bool, error)
	// DeleteSession ends a session (logout).
	DeleteSession(ctx context.Context, idHash []byte) error
}

// auth checks the owner's credentials: a bearer token (API, TUI) or a
// session cookie (browser). The cookie is a random id whose hash the
// session store holds (shared by every instance through the database);
// it is not derived from the token or its stored hash.
type auth struct {
	tokenHash   []byte
	credentials OwnerCredentials
	now         func() time.Time
	sessions    SessionStore
}

// OwnerCredentials holds the owner's token hash where every instance reads
// it (the database).
type OwnerCredentials interface {
	// OwnerTokenHash is the SHA-256 of the owner's token now in force.
	OwnerTokenHash(ctx context.Context) ([]byte, error)
}

// tokenOK compares token with the hash in force: the stored one, read on
// each call (one primary-key lookup), when the server has Credentials.
func (a *auth) tokenOK(ctx context.Context, token string) bool {
	if token == "" {
		return false
	}
	want := a.tokenHash
	if a.credentials != nil {
		h, err := a.credentials.OwnerTokenHash(ctx)
		if err != nil {
			return false
		}
		want = h
	}
	if len(want) != sha256.Size {
		return false
	}
	return subtle.ConstantTimeCompare(HashToken(token), want) == 1
}

func (a *auth) newSession(ctx context.Context) (string, time.Time, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	exp := a.now().Add(sessionTTL)
	return id, exp, a.sessions.CreateSession(ctx, HashToken(id), exp)
}

func (a *auth) sessionOK(ctx context.Context, v string) bool {
	if len(v) != 43 { // base64url of 32 bytes
		return false
	}
	ok, err := a.sessions.SessionValid(ctx, HashToken(v))
	return err == nil && ok
}

// memSessions is the session store of a server without a database (tests,
// a single process).
type memSessions struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (s *memSessions) CreateSession(_ context.Context, h []byte, exp time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]time.Time{}
	}
	s.m[string(h)] = exp
	return nil
}

func (s *memSessions) SessionValid(_ context.Context, h []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.m[string(h)]
	return ok && time.Now().Before(exp), nil
}

func (s *memSessions) DeleteSession(_ context.Context, h []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, string(h))
	return nil
}

type authKind int

const (
	authNone authKind = iota
	authBearer
	authCookie
)

func (a *auth) check(r *http.Request) authKind {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && a.tokenOK(r.Context(), strings.TrimSpace(tok)) {
			return authBearer
		}
		return authNone
	}
	if c, err := r.Cookie(sessionCookie); err == nil && a.sessionOK(r.Context(), c.Value) {
		return authCookie
	}
	return authNone
}

// authOf is the request's credentials: as the rate limiter found them, or
// looked up now.
func (s *Server) authOf(c echo.Context) authKind {
	if kind, ok := c.Get(authKindKey).(authKind); ok {
		return kind
	}
	kind := s.auth.check(c.Request())
	c.Set(authKindKey, kind)
	return kind
}

// requireOwner rejects requests without the owner's credentials with 401
// and nothing else. Cookie-authenticated writes must also come from this
// origin (CSRF): browsers send Origin on every cross-site POST.
func (s *Server) requireOwner(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		kind := s.authOf(c)
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

func (s *Server) setSession(c echo.Context) error {
	v, exp, err := s.auth.newSession(c.Request().Context())
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: v, Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.opts.SecureCookies,
	})
	return nil
}

// handleLoginPage shows the login form, or logs in from a ?token= link and
// redirects so the token leaves the address bar.
func (s *Server) handleLoginPage(c echo.Context) error {
	if tok := c.QueryParam("token"); tok != "" {
		if !s.auth.tokenOK(c.Request().Context(), tok) {
			return c.HTML(http.StatusUnauthorized, loginHTML("That login link is not valid (perhaps an old one). The owner can print a new link with: switchboard token reset (or, when the token is set by WEB_AUTH_TOKEN, log in with that token below)."))
		}
		if err := s.setSession(c); err != nil {
			return err
		}
		s.auditLogin(c, "link")
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return c.HTML(http.StatusOK, loginHTML(""))
}

func (s *Server) handleLogin(c echo.Context) error {
	tok := strings.TrimSpace(c.FormValue("token"))
	if !s.auth.tokenOK(c.Request().Context(), tok) {
		return c.HTML(http.StatusUnauthorized, loginHTML("Wrong token."))
	}
	if err := s.setSession(c); err != nil {
		return err
	}
	s.auditLogin(c, "form")
	return c.Redirect(http.StatusSeeOther, "/")
}

func (s *Server) handleLogout(c echo.Context) error {
	if !sameOrigin(c.Request()) {
		return c.JSON(http.StatusForbidden, errorBody{Error: "cross-origin request refused"})
	}
	if ck, err := c.Request().Cookie(sessionCookie); err == nil {
		if s.auth.sessionOK(c.Request().Context(), ck.Value) {
			s.auditLogout(c)
		}
		_ = s.auth.sessions.DeleteSession(c.Request().Context(), HashToken(ck.Value))
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return c.Redirect(http.StatusSeeOther, "/login")
}

// revoked reports whether the credentials of r, accepted when it was
// made, are no longer in force: the owner's token was reset (on any
// instance: the hash is read from the database) or the session was ended
// (logout). A lookup that fails says nothing (false): a database hiccup
// does not close a live connection.
func (a *auth) revoked(ctx context.Context, r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, _ := strings.CutPrefix(h, "Bearer ")
		want := a.tokenHash
		if a.credentials != nil {
			var err error
			if want, err = a.credentials.OwnerTokenHash(ctx); err != nil {
				return false
			}
		}
		return subtle.ConstantTimeCompare(HashToken(strings.TrimSpace(tok)), want) != 1
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return true
	}
	ok, err := a.sessions.SessionValid(ctx, HashToken(c.Value))
	return err == nil && !ok
}
