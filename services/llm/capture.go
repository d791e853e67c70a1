package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
)

// Capture keeps the exact body of the last HTTP request a provider sent
// for one Complete call (the JSON it put on the wire; with retries,
// the last attempt's). Attach it with WithCapture.
type Capture struct {
	// Encode, when set, is applied to each captured body in the
	// background while the request is in flight (compression costs no
	// time of the turn's own); Encoded waits for the last body's.
	Encode func([]byte) []byte

	mu   sync.Mutex
	body []byte
	url  string
	enc  chan []byte
}

type captureKey struct{}

// WithCapture returns ctx carrying c: requests made with it record their
// body in c.
func WithCapture(ctx context.Context, c *Capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// Body is the last request body sent (nil when none), and its URL.
func (c *Capture) Body() ([]byte, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body, c.url
}

// Encoded is Encode of the last body sent (nil when none, or no Encode).
func (c *Capture) Encoded() []byte {
	c.mu.Lock()
	ch := c.enc
	c.mu.Unlock()
	if ch == nil {
		return nil
	}
	v := <-ch
	ch <- v // for the next caller
	return v
}

func (c *Capture) set(body []byte, url string) {
	c.mu.Lock()
	c.body, c.url = body, url
	if c.Encode != nil {
		ch := make(chan []byte, 1)
		c.enc = ch
		go func() { ch <- c.Encode(body) }()
	}
	c.mu.Unlock()
}

// captureTransport records request bodies for a Capture in the request's
// context; other requests pass untouched.
type captureTransport struct{ base http.RoundTripper }

func (t captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c, ok := r.Context().Value(captureKey{}).(*Capture); ok && r.Body != nil {
		var body []byte
		if r.GetBody != nil {
			if rc, err := r.GetBody(); err == nil {
				body, _ = io.ReadAll(rc)
				_ = rc.Close()
			}
		} else {
			// Read it and give the request a copy.
			body, _ = io.ReadAll(r.Body)
			_ = r.Body.Close()
			r = r.Clone(r.Context())
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		c.set(body, r.URL.Redacted())
	}
	return t.base.RoundTrip(r)
}

// capturing wraps client's transport with captureTransport.
func capturing(client *http.Client) *http.Client {
	c := *client
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = captureTransport{base: base}
	return &c
}
