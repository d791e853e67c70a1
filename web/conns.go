package web

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimits bounds what idle or slow clients can hold: how long a
// connection may take to send its request, to be answered, and to sit idle
// between requests, and how many connections one client address and all
// clients together may hold at once. Past a cap a new connection gets a 503
// and is closed; the connections already held are untouched, so the owner
// keeps being served while a stranger from another address is at its cap.
// Streamed answers (SSE of /v1/chat/completions) and websockets clear or
// extend their deadlines themselves.
type ConnLimits struct {
	// PerIP caps concurrent connections from one client address.
	PerIP int
	// Total caps concurrent connections from all clients.
	Total int
	// ReadHeaderTimeout bounds the wait for a request's headers (a
	// connection that says nothing); ReadTimeout the whole request;
	// WriteTimeout the answer; IdleTimeout a kept-alive connection between
	// requests.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
}

// DefaultConnLimits are the limits of zero ConnLimits fields.
var DefaultConnLimits = ConnLimits{
	PerIP: 64, Total: 512,
	ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
	WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second,
}

func (l ConnLimits) withDefaults() ConnLimits {
	d := DefaultConnLimits
	pick := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if l.PerIP <= 0 {
		l.PerIP = d.PerIP
	}
	if l.Total <= 0 {
		l.Total = d.Total
	}
	pick(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	pick(&l.ReadTimeout, d.ReadTimeout)
	pick(&l.WriteTimeout, d.WriteTimeout)
	pick(&l.IdleTimeout, d.IdleTimeout)
	return l
}

// connLimiter counts open connections per client address and in total.
type connLimiter struct {
	limits  ConnLimits
	mu      sync.Mutex
	perIP   map[string]int
	total   atomic.Int64
	refused atomic.Int64
}

func newConnLimiter(l ConnLimits) *connLimiter {
	return &connLimiter{limits: l, perIP: map[string]int{}}
}

func (cl *connLimiter) acquire(ip string) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.perIP[ip] >= cl.limits.PerIP || cl.total.Load() >= int64(cl.limits.Total) {
		return false
	}
	cl.perIP[ip]++
	cl.total.Add(1)
	return true
}

func (cl *connLimiter) release(ip string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.perIP[ip]--; cl.perIP[ip] <= 0 {
		delete(cl.perIP, ip)
	}
	cl.total.Add(-1)
}

func (cl *connLimiter) wrap(l net.Listener) net.Listener {
	return &limitedListener{Listener: l, cl: cl}
}

// limitedListener hands the server only connections within the caps.
type limitedListener struct {
	net.Listener
	cl *connLimiter
}

// overCapResponse is what a connection past a cap reads before it is closed.
const overCapResponse = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 5\r\nConnection: close\r\nContent-Length: 40\r\n\r\ntoo many connections from this address\r\n"

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := hostOf(c.RemoteAddr())
		if l.cl.acquire(ip) {
			return &limitedConn{Conn: c, release: func() { l.cl.release(ip) }}, nil
		}
		l.cl.refused.Add(1)
		go func() {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte(overCapResponse))
			_ = c.Close()
		}()
	}
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitedConn gives its place back when closed (once).
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// clearDeadlines lifts the server's read and write timeouts from a
// response that streams for as long as it lives (a websocket); until
// (non-zero) sets both to that time instead.
func clearDeadlines(w http.ResponseWriter, until time.Time) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(until)
	_ = rc.SetWriteDeadline(until)
}
