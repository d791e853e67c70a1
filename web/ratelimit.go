package web

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// RateLimit is the per-identity request budget of one instance: a token
// bucket per identity (golang.org/x/time/rate), refilled at PerMinute/60
// tokens a second and holding at most Burst. The owner is one identity
// (every client with the token or a session shares it, REST requests and
// websocket post frames alike); a request without valid credentials is
// counted against its client's IP, so guessing tokens and hammering /login
// are slow. The anonymous limit is applied before any credential lookup in
// the database, so refused strangers cost no query. A zero PerMinute turns
// that limit off. Health probes, static files and the Telegram webhook
// (which has its own secret) are not counted.
type RateLimit struct {
	OwnerPerMinute int
	OwnerBurst     int
	AnonPerMinute  int
	AnonBurst      int
}

// maxRateKeys bounds the anonymous buckets kept in memory; past it the
// table starts afresh (an attacker with that many addresses gains a burst).
const maxRateKeys = 65536

// limiter is a set of token buckets with one rate, one per key.
type limiter struct {
	mu        sync.Mutex
	limit     rate.Limit
	burst     int
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
	now       func() time.Time
}

func newLimiter(perMinute, burst int, now func() time.Time) *limiter {
	if perMinute <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = max(1, perMinute/6)
	}
	return &limiter{limit: rate.Limit(float64(perMinute) / 60), burst: burst, buckets: map[string]*rate.Limiter{}, now: now}
}

// reserve takes a token for key, which the caller may give back with
// r.CancelAt; or, when none is there, takes nothing and says how long until
// one is.
func (l *limiter) reserve(key string) (*rate.Reservation, time.Time, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	b := l.buckets[key]
	if b == nil {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	r := b.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return nil, now, wait
	}
	return r, now, 0
}

// allow takes a token for key, or says how long until one is there.
func (l *limiter) allow(key string) (bool, time.Duration) {
	r, _, wait := l.reserve(key)
	return r != nil, wait
}

// sweep forgets buckets that have refilled (idle identities), once a
// minute, and everything when the table is too big.
func (l *limiter) sweep(now time.Time) {
	if len(l.buckets) >= maxRateKeys {
		clear(l.buckets)
	}
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}

// rateExempt reports paths outside the limits: probes, assets, and the
// webhook Telegram authenticates with its own secret.
func rateExempt(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/telegram/webhook" || strings.HasPrefix(path, "/static/")
}

// clientIP is the peer's address. X-Forwarded-For is not trusted: behind a
// reverse proxy every anonymous client shares the proxy's bucket.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retrySeconds is a wait rounded up to whole seconds (at least 1).
func retrySeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

// authKindKey holds the request's authKind once the rate limiter looked it
// up, so requireOwner does not look it up again.
const authKindKey = "switchboard.authKind"

// rateLimiter is the middleware enforcing Options.RateLimit: 429 with
// Retry-After (whole seconds) once an identity's bucket is empty. The
// client IP's anonymous token is taken before the credentials are looked up
// (a session or the stored token hash is a database query) and given back
// when they are the owner's: a stranger past the anonymous limit reaches no
// database.
func (s *Server) rateLimiter() echo.MiddlewareFunc {
	owner, anon := s.ownerLimit, s.anonLimit
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if (owner == nil && anon == nil) || rateExempt(r.URL.Path) {
				return next(c)
			}
			var res *rate.Reservation
			var at time.Time
			if anon != nil {
				var wait time.Duration
				if res, at, wait = anon.reserve("ip:" + clientIP(r)); res == nil {
					return tooManyRequests(c, wait)
				}
			}
			kind := s.auth.check(r)
			c.Set(authKindKey, kind)
			if kind == authNone {
				return next(c)
			}
			if res != nil {
				res.CancelAt(at) // the owner's requests do not spend the IP's anonymous budget
			}
			if owner != nil {
				if ok, wait := owner.allow("owner"); !ok {
					return tooManyRequests(c, wait)
				}
			}
			return next(c)
		}
	}
}

func tooManyRequests(c echo.Context, wait time.Duration) error {
	secs := retrySeconds(wait)
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	if isAPIPath(c.Request().URL.Path) {
		// Answered by the OpenAI-compatible channel, in its shape.
		return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf("too many requests; retry in %d s", secs))
	}
	return c.JSON(http.StatusTooManyRequests, errorBody{
		Error: fmt.Sprintf("too many requests; retry in %d s", secs), Code: "RATE_LIMITED"})
}
