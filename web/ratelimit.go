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
)

// RateLimit is the per-identity request budget of one instance: a token
// bucket per identity, refilled at PerMinute/60 tokens a second and holding
// at most Burst. The owner is one identity (every client with the token or
// a session shares it); a request without valid credentials is counted
// against its client's IP, so guessing tokens and hammering /login are slow.
// A zero PerMinute turns that limit off. Health probes, static files and
// the Telegram webhook (which has its own secret) are not counted.
type RateLimit struct {
	OwnerPerMinute int
	OwnerBurst     int
	AnonPerMinute  int
	AnonBurst      int
}

// maxRateKeys bounds the anonymous buckets kept in memory; past it the
// table starts afresh (an attacker with that many addresses gains a burst).
const maxRateKeys = 65536

// bucket is one identity's tokens at a time.
type bucket struct {
	tokens float64
	at     time.Time
}

// limiter is a set of token buckets with one rate.
type limiter struct {
	mu        sync.Mutex
	perSec    float64
	burst     float64
	buckets   map[string]*bucket
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
	return &limiter{perSec: float64(perMinute) / 60, burst: float64(burst), buckets: map[string]*bucket{}, now: now}
}

// allow takes a token for key, or says how long until one is there.
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.perSec)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.perSec * float64(time.Second))
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
	full := time.Duration(l.burst / l.perSec * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.at) > full {
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

// rateLimiter is the middleware enforcing Options.RateLimit: 429 with
// Retry-After (whole seconds) once an identity's bucket is empty.
func (s *Server) rateLimiter() echo.MiddlewareFunc {
	rl := s.opts.RateLimit
	owner := newLimiter(rl.OwnerPerMinute, rl.OwnerBurst, time.Now)
	anon := newLimiter(rl.AnonPerMinute, rl.AnonBurst, time.Now)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if (owner == nil && anon == nil) || rateExempt(r.URL.Path) {
				return next(c)
			}
			l, key := anon, "ip:"+clientIP(r)
			if s.auth.check(r) != authNone {
				l, key = owner, "owner"
			}
			if l == nil {
				return next(c)
			}
			if ok, wait := l.allow(key); !ok {
				secs := int(math.Ceil(wait.Seconds()))
				c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
				return c.JSON(http.StatusTooManyRequests, errorBody{
					Error: fmt.Sprintf("too many requests; retry in %d s", max(1, secs)), Code: "RATE_LIMITED"})
			}
			return next(c)
		}
	}
}
