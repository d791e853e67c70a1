package e2e

// Helpers for the fault tests (fault_*_test.go): real `switchboard serve`
// processes whose output is kept, that can be killed with SIGKILL, and a
// small owner client for them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// lockedBuffer is an io.Writer safe for a process's output and a test
// reading it at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveProc is one running `switchboard serve`.
type serveProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	URL    string
	Stdout *lockedBuffer
	Stderr *lockedBuffer
	exited chan struct{}
}

// startProc runs serve on dbURL with env added to the test's environment
// (later entries win) and waits until it listens.
func startProc(t *testing.T, bin, dbURL string, env ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "HTTP_ADDR=127.0.0.1:0", "DATA_DIR="+t.TempDir(), "LOG_FORMAT=json")
	cmd.Env = append(cmd.Env, env...)
	p := &serveProc{t: t, cmd: cmd, Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.Stdout, line)
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case listening <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.stop)
	select {
	case p.URL = <-listening:
		return p
	case <-p.exited:
		t.Fatalf("serve exited before listening:\n%s", tail(p.Stderr.String(), 3000))
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen within 30s:\n%s", tail(p.Stderr.String(), 3000))
	}
	return nil
}

// kill9 ends the process with SIGKILL: no shutdown code runs.
func (p *serveProc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop interrupts the process and waits for it (idempotent).
func (p *serveProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// ownerClient talks to a server as the owner, with the bearer token.
type ownerClient struct {
	base, token string
	http        *http.Client
}

func newOwnerClient(base, token string) *ownerClient {
	return &ownerClient{base: base, token: token, http: &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// apiMessage is a timeline message as the API returns it.
type apiMessage struct {
	ID       int64           `json:"id"`
	Role     string          `json:"role"`
	Source   string          `json:"source"`
	Content  string          `json:"content"`
	Metadata json.RawMessage `json:"metadata"`
}

// replyTo is the id of the message this one answers (0: none).
func (m apiMessage) replyTo() int64 {
	var md struct {
		ReplyTo int64 `json:"reply_to"`
	}
	_ = json.Unmarshal(m.Metadata, &md)
	return md.ReplyTo
}

// postResult is the outcome of one POST /api/messages.
type postResult struct {
	Status     int
	RetryAfter string
	Body       string
	Message    apiMessage
	Err        error // connection-level failure
}

func (c *ownerClient) post(content, clientKey string) postResult {
	b, _ := json.Marshal(map[string]string{"content": content, "client_key": clientKey})
	req, _ := http.NewRequest("POST", c.base+"/api/messages", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return postResult{Err: err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := postResult{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Body: string(body)}
	var out struct{ Message apiMessage }
	if json.Unmarshal(body, &out) == nil {
		r.Message = out.Message
	}
	return r
}

// timeline returns every visible message after id 0, in id order.
func (c *ownerClient) timeline(t *testing.T) []apiMessage {
	t.Helper()
	all, err := c.tryTimeline()
	if err != nil {
		t.Fatalf("timeline: %v", err)
	}
	return all
}

// tryTimeline is timeline for polls, which take an error (a keep-alive
// connection the server just closed) as "not yet".
func (c *ownerClient) tryTimeline() ([]apiMessage, error) {
	var all []apiMessage
	after := int64(0)
	for {
		req, _ := http.NewRequest("GET", c.base+"/api/timeline?limit=500&after="+fmt.Sprint(after), nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, err
		}
		var page struct{ Messages []apiMessage }
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return nil, fmt.Errorf("%d %v", resp.StatusCode, err)
		}
		all = append(all, page.Messages...)
		if len(page.Messages) < 500 {
			return all, nil
		}
		after = page.Messages[len(page.Messages)-1].ID
	}
}

// repliesTo returns the messages answering id.
func repliesTo(msgs []apiMessage, id int64) []apiMessage {
	var out []apiMessage
	for _, m := range msgs {
		if m.replyTo() == id {
			out = append(out, m)
		}
	}
	return out
}

// waitReplies polls the timeline until id has at least one reply, then
// waits settle for a duplicate to show, and returns the replies.
func (c *ownerClient) waitReplies(t *testing.T, id int64, within, settle time.Duration) []apiMessage {
	t.Helper()
	if !pollEvery(within, 100*time.Millisecond, func() bool {
		msgs, err := c.tryTimeline()
		return err == nil && len(repliesTo(msgs, id)) > 0
	}) {
		return nil
	}
	time.Sleep(settle) // why kept: callers assert exactly one reply, and a duplicate is a thing that must NOT happen; nothing signals it will not, and the service is another process (no bubble)
	return repliesTo(c.timeline(t), id)
}

// wsFrame is a websocket frame as the fault tests read it.
type wsFrame struct {
	Type    string      `json:"type"`
	Message *apiMessage `json:"message"`
	LastID  int64       `json:"last_id"`
}

// dialOwnerWS opens the timeline websocket after id.
func dialOwnerWS(ctx context.Context, base, token string, after int64) (*websocket.Conn, error) {
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/ws?after=" + url.QueryEscape(fmt.Sprint(after))
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	return conn, nil
}
