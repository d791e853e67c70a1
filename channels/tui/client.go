package tui

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/switchboard/switchboard/web/wire"
)

// ErrUnauthorized is returned when the server answers 401.
var ErrUnauthorized = errors.New("the server refused the token (check --token / SWITCHBOARD_TOKEN)")

// APIError is a non-2xx answer from the server.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("server answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("server answered %d: %s", e.Status, e.Message)
}

// Temporary reports whether retrying the same request may succeed.
func (e *APIError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// Client calls a Switchboard server's API with the owner's token.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// NewClient returns a client of the server at baseURL (http or https).
func NewClient(baseURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http://host:port or https://host", baseURL)
	}
	if token == "" {
		return nil, errors.New("no token: pass --token or set SWITCHBOARD_TOKEN (the server's WEB_AUTH_TOKEN or the token it printed at first start)")
	}
	return &Client{base: u, token: token, http: &http.Client{Timeout: 15 * time.Second}}, nil
}

// BaseURL is the server's address as given.
func (c *Client) BaseURL() string { return c.base.String() }

// TimelineQuery selects a page: the newest Limit messages before Before
// (0: the latest), or, with After set, the messages after After.
type TimelineQuery struct {
	Before, After int64
	Limit         int
}

// Timeline fetches a page of the owner's timeline, ascending by id.
func (c *Client) Timeline(ctx context.Context, q TimelineQuery) (wire.Page, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Before > 0 {
		v.Set("before", strconv.FormatInt(q.Before, 10))
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	var page wire.Page
	err := c.do(ctx, http.MethodGet, "/api/timeline?"+v.Encode(), nil, &page)
	return page, err
}

// Post stores content in the timeline with source tui. A retry with the same
// clientKey returns the message stored first instead of storing another.
func (c *Client) Post(ctx context.Context, content, clientKey string) (wire.Message, error) {
	body, _ := json.Marshal(map[string]string{"content": content, "client_key": clientKey, "source": SourceTUI})
	var out struct {
		Message wire.Message `json:"message"`
	}
	err := c.do(ctx, http.MethodPost, "/api/messages", body, &out)
	return out.Message, err
}

// Upload stores content with the file at path (a multipart POST), source
// tui; a retry with the same clientKey stores once. A file that cannot be
// read is an *APIError 400 (retrying will not help).
func (c *Client) Upload(ctx context.Context, content, clientKey, path string) (wire.Message, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return wire.Message{}, &APIError{Status: http.StatusBadRequest, Message: "cannot read " + path + ": " + err.Error()}
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("content", content)
	_ = mw.WriteField("client_key", clientKey)
	_ = mw.WriteField("source", SourceTUI)
	fw, _ := mw.CreateFormFile("file", filepath.Base(path))
	_, _ = fw.Write(data)
	_ = mw.Close()
	var out struct {
		Message wire.Message `json:"message"`
	}
	err = c.send(ctx, http.MethodPost, "/api/messages", body.Bytes(), mw.FormDataContentType(), &out)
	return out.Message, err
}

// ToolResult fetches what tool call callID of run runID returned (GET
// /api/runs/:run/tools/:call).
func (c *Client) ToolResult(ctx context.Context, runID int64, callID string) (wire.ToolResult, error) {
	var out wire.ToolResult
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/runs/%d/tools/%s", runID, url.PathEscape(callID)), nil, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	return c.send(ctx, method, path, body, "application/json", out)
}

func (c *Client) send(ctx context.Context, method, path string, body []byte, contentType string, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.reachError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return c.reachError(err)
	}
	if err := statusError(resp.StatusCode, data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the server sent invalid JSON: %v", method, strings.SplitN(path, "?", 2)[0], err)
	}
	return nil
}

func statusError(status int, body []byte) error {
	switch {
	case status == http.StatusUnauthorized:
		return ErrUnauthorized
	case status >= 200 && status < 300:
		return nil
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return &APIError{Status: status, Message: e.Error}
}

// Dial opens the websocket, asking for every message after the given id.
func (c *Client) Dial(ctx context.Context, after int64) (*websocket.Conn, error) {
	u := *c.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = strings.TrimRight(u.Path, "/") + "/api/ws"
	u.RawQuery = "after=" + strconv.FormatInt(after, 10)
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.token}},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			if serr := statusError(resp.StatusCode, nil); serr != nil {
				return nil, serr
			}
		}
		return nil, c.reachError(err)
	}
	// Frames carry messages of up to 32 KiB of text; leave room for escaping.
	conn.SetReadLimit(1 << 20)
	return conn, nil
}

// ReachError says why the server could not be reached, in one line:
// "cannot reach http://host:port: connection refused".
type ReachError struct {
	URL    string
	Reason string
	Err    error
}

func (e *ReachError) Error() string { return "cannot reach " + e.URL + ": " + e.Reason }
func (e *ReachError) Unwrap() error { return e.Err }

func (c *Client) reachError(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return &ReachError{URL: c.base.String(), Reason: reason(err), Err: err}
}

// reason names a network failure the way a person would.
func reason(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host"
	case errors.As(err, &dnsErr):
		return "no such host " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	// Innermost error text, without the url.Error's "Get \"…\":" prefix.
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// NewClientKey returns a random idempotency key for one post.
func NewClientKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "tui-" + hex.EncodeToString(b[:])
}
