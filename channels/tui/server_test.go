package tui

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/hub"
	"github.com/switchboard/switchboard/web/wire"
)

func TestMain(m *testing.M) { apptest.Main(m) }

const testToken = "tui-test-owner-token-0123456789"

// server is one whole Switchboard instance (apptest: the app serve builds)
// on a migrated test schema, where nobody answers.
type server struct {
	URL  string
	Chat *chat.Service
	Hub  *hub.Hub
	in   *apptest.Instance
}

// startServer serves on addr ("127.0.0.1:0" for any port). Its crash
// method drops every connection at once, websockets included.
func startServer(t *testing.T, pool *pgxpool.Pool, addr string) *server {
	t.Helper()
	in := apptest.Start(t, apptest.Options{DatabaseURL: pool.Config().ConnString(), Token: testToken, Addr: addr})
	return &server{URL: in.URL, Chat: in.Chat, Hub: in.Hub, in: in}
}

// crash stops the server the way a killed process does: listener and every
// open connection gone.
func (s *server) crash() { s.in.Crash() }

func (s *server) post(t *testing.T, source, content string) services.Message {
	t.Helper()
	m, _, err := s.Chat.Post(context.Background(), services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.Source(source), Content: content})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newTestClient(t *testing.T, url, token string) *Client {
	t.Helper()
	c, err := NewClient(url, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientTimelineAndIdempotentPost(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	srv := startServer(t, pool, "127.0.0.1:0")
	c := newTestClient(t, srv.URL, testToken)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		srv.post(t, "telegram", "older "+string(rune('a'+i)))
	}
	first, err := c.Post(ctx, "from the terminal", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Post(ctx, "from the terminal", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if first.ID == 0 || again.ID != first.ID || first.Source != "tui" || first.Role != "user" {
		t.Fatalf("post %+v, retry %+v", first, again)
	}
	page, err := c.Timeline(ctx, TimelineQuery{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 3 || !page.HasOlder || page.Messages[2].ID != first.ID {
		t.Fatalf("latest page: %+v", page)
	}
	older, err := c.Timeline(ctx, TimelineQuery{Before: page.Messages[0].ID, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(older.Messages) != 3 || older.HasOlder || older.Messages[0].Content != "older a" || older.Messages[0].Source != "telegram" {
		t.Fatalf("older page: %+v", older)
	}
}

func TestClientErrorsAreOneClearLine(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	srv := startServer(t, pool, "127.0.0.1:0")
	ctx := context.Background()

	bad := newTestClient(t, srv.URL, "not-the-token-at-all")
	if _, err := bad.Timeline(ctx, TimelineQuery{}); !errors.Is(err, ErrUnauthorized) ||
		err.Error() != "the server refused the token (check --token / SWITCHBOARD_TOKEN)" {
		t.Fatalf("timeline with a bad token: %v", err)
	}
	if _, err := bad.Dial(ctx, 0); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("dial with a bad token: %v", err)
	}
	err := Run(ctx, RunOptions{URL: srv.URL, Token: "not-the-token-at-all"})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Run with a bad token: %v", err)
	}

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	err = Run(ctx, RunOptions{URL: dead, Token: testToken})
	if err == nil || err.Error() != "cannot reach "+dead+": connection refused" {
		t.Fatalf("Run against nothing: %v", err)
	}
	if _, err := newTestClient(t, dead, testToken).Dial(ctx, 0); err == nil || err.Error() != "cannot reach "+dead+": connection refused" {
		t.Fatalf("dial against nothing: %v", err)
	}
	if err := Run(ctx, RunOptions{URL: "ftp://x", Token: testToken}); err == nil || !strings.Contains(err.Error(), "--url") {
		t.Fatalf("bad url: %v", err)
	}
	if err := Run(ctx, RunOptions{URL: srv.URL}); err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
}

// collector gathers what a Feed sends.
type collector struct{ ch chan any }

func newCollector() *collector { return &collector{ch: make(chan any, 1000)} }

func (c *collector) send(m any) { c.ch <- m }

// until reads until ok returns true for a message, returning every message read.
func (c *collector) until(t *testing.T, what string, ok func(any) bool) []any {
	t.Helper()
	var got []any
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-c.ch:
			got = append(got, m)
			if ok(m) {
				return got
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s; got %#v", what, got)
		}
	}
}

func isConn(s ConnState) func(any) bool {
	return func(m any) bool { c, ok := m.(ConnMsg); return ok && c.State == s }
}

func isContent(text string) func(any) bool {
	return func(m any) bool { mm, ok := m.(MessageMsg); return ok && mm.Message.Content == text }
}

func contents(msgs []any) []string {
	var out []string
	for _, m := range msgs {
		if mm, ok := m.(MessageMsg); ok {
			out = append(out, mm.Message.Content)
		}
	}
	return out
}

// TestFeedSurvivesServerRestart: the server dies and comes back on the same
// port; the feed reports offline, reconnects with after=<last id> and
// delivers exactly the messages stored meanwhile, once each, in order.
func TestFeedSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	dbtest.Reserve(t, 18) // the restarted server's pool opens while the first one's closes: 13 to 16 measured
	pool, _ := dbtest.Schema(t)
	a := startServer(t, pool, "127.0.0.1:0")
	addr := strings.TrimPrefix(a.URL, "http://")
	seed := a.post(t, "web", "before start")

	col := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed := &Feed{Client: newTestClient(t, a.URL, testToken), Send: col.send, MinBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}
	go feed.Run(ctx, seed.ID)

	col.until(t, "live", isConn(Live))
	a.post(t, "web", "one")
	a.post(t, "telegram", "two")
	got := contents(col.until(t, "two", isContent("two")))
	if strings.Join(got, ",") != "one,two" {
		t.Fatalf("live messages: %v", got)
	}

	a.crash()
	off := col.until(t, "offline", isConn(Offline))
	if c := off[len(off)-1].(ConnMsg); c.Err == nil {
		t.Fatal("offline without a reason")
	}
	// Stored while no server was up (another instance, say).
	a.post(t, "telegram", "three")
	a.post(t, "web", "four")

	b := startServer(t, pool, addr)
	after := col.until(t, "live again", isConn(Live))
	b.post(t, "web", "five")
	after = append(after, col.until(t, "five", isContent("five"))...)
	if got := strings.Join(contents(after), ","); got != "three,four,five" {
		t.Fatalf("after the restart got %q, want three,four,five (no gaps, no repeats)", got)
	}
}

// fakeWS is a websocket server that plays frames the real server does not
// send yet (streaming, run status, handoffs) and some broken ones.
type fakeWS struct {
	mu     sync.Mutex
	afters []string
	frames [][]string // per connection
}

func (f *fakeWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	n := len(f.afters)
	f.afters = append(f.afters, r.URL.Query().Get("after"))
	var frames []string
	if n < len(f.frames) {
		frames = f.frames[n]
	}
	f.mu.Unlock()
	conn, err := acceptWS(w, r)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	for _, fr := range frames {
		if err := conn.write(fr); err != nil {
			return
		}
	}
	if n+1 >= len(f.frames) {
		conn.wait() // the last connection stays open
	}
}

func TestFeedAndModelRenderStreamingFromFakeServer(t *testing.T) {
	t.Parallel()
	final, _ := json.Marshal(map[string]any{"type": "message", "message": map[string]any{
		"id": 3, "timeline": "global", "role": "assistant", "source": "agent", "content": "Hello there.",
		"metadata": map[string]any{"run_id": 9}, "created_at": "2026-11-21T20:02:00Z"}})
	handoff, _ := json.Marshal(map[string]any{"type": "message", "message": map[string]any{
		"id": 4, "timeline": "global", "role": "assistant", "source": "agent", "agent_id": "researcher",
		"content": "Read 3 files\nmore detail", "metadata": map[string]any{"kind": "handoff", "run_id": 10},
		"created_at": "2026-11-21T20:03:00Z"}})
	fake := &fakeWS{frames: [][]string{
		{
			`{"type":"message","message":{"id":2,"timeline":"global","role":"user","source":"web","content":"hi","created_at":"2026-11-21T20:01:00Z"}}`,
			`{"type":"ready","last_id":2}`,
			`{"type":"event","event":{"t":"run","tl":"global","run":9,"d":{"status":"running"}}}`,
			`{"type":"event","event":{"t":"delta","tl":"global","run":9,"d":{"text":"Hel"}}}`,
			`{not json`,
			`{"type":"something_new"}`,
			`{"type":"event","event":{"t":"delta","tl":"global","run":9,"d":{"text":"lo th"}}}`,
		},
		{
			`{"type":"ready","last_id":2}`,
			`{"type":"event","event":{"t":"delta","tl":"global","run":9,"d":{"text":"ere"}}}`,
			string(final),
			`{"type":"event","event":{"t":"run","tl":"global","run":9,"d":{"status":"ok"}}}`,
			string(handoff),
			`{"type":"error","error":"content is empty"}`,
		},
	}}
	hs := httptest.NewServer(fake)
	defer hs.Close()

	m := newTestModel(t, nil, wire.Page{Messages: []wire.Message{msgAt(1, "tui", "user", "first")}}, 100, 30)
	col := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed := &Feed{Client: newTestClient(t, hs.URL, testToken), Send: col.send, MinBackoff: 50 * time.Millisecond}
	go feed.Run(ctx, m.NewestID())

	apply := func(msgs []any) {
		for _, msg := range msgs {
			send(t, m, msg)
		}
	}
	isDelta := func(text string) func(any) bool {
		return func(x any) bool {
			e, ok := x.(EventMsg)
			return ok && e.Event.Type == wire.EventDelta && strings.Contains(string(e.Event.Data), text)
		}
	}
	apply(col.until(t, "second delta", isDelta("lo th")))
	v := screen(m)
	if !strings.Contains(v, "[web] user: hi") || !strings.Contains(v, "[agent] assistant: Hello th▍") || !strings.Contains(v, "agent is working…") {
		t.Fatalf("streaming:\n%s", v)
	}
	if s := statusOf(m); !strings.Contains(s, "protocol error, wire.Frame skipped: bad JSON frame") || !strings.Contains(s, "live") {
		t.Fatalf("bad wire.Frame not reported once in the status line: %q", s)
	}
	// The fake server hangs up; the feed reconnects after the newest id.
	apply(col.until(t, "offline", isConn(Offline)))
	if s := statusOf(m); !strings.Contains(s, "offline — reconnecting…") {
		t.Fatalf("status %q", s)
	}
	apply(col.until(t, "error frame", func(x any) bool { _, ok := x.(ServerErrorMsg); return ok }))
	v = screen(m)
	if strings.Contains(v, "▍") || strings.Count(v, "Hello there.") != 1 || strings.Contains(v, "working") {
		t.Fatalf("final message did not replace the stream:\n%s", v)
	}
	if !strings.Contains(v, "⇄ handoff from researcher: Read 3 files") || strings.Contains(v, "more detail") {
		t.Fatalf("handoff marker:\n%s", v)
	}
	if s := statusOf(m); !strings.Contains(s, "● live") || !strings.Contains(s, "server: content is empty") {
		t.Fatalf("status %q", s)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.afters) != 2 || fake.afters[0] != "1" || fake.afters[1] != "2" {
		t.Fatalf("connected with after=%v, want [1 2]", fake.afters)
	}
}

// TestFeedStreamsRealServerEvents: delta and run events published to the
// real server's hub reach the model through the real websocket.
func TestFeedStreamsRealServerEvents(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	srv := startServer(t, pool, "127.0.0.1:0")
	m := newTestModel(t, nil, wire.Page{}, 100, 30)
	col := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Feed{Client: newTestClient(t, srv.URL, testToken), Send: col.send}).Run(ctx, 0)
	for _, msg := range col.until(t, "live", isConn(Live)) {
		send(t, m, msg)
	}
	srv.Hub.Notify(services.Event{Type: services.EventRun, TimelineScope: "global", RunID: 4, Data: json.RawMessage(`{"status":"running"}`)})
	srv.Hub.Notify(services.Event{Type: services.EventDelta, TimelineScope: "global", RunID: 4, Data: json.RawMessage(`{"text":"stream"}`)})
	for _, msg := range col.until(t, "delta", func(x any) bool { e, ok := x.(EventMsg); return ok && e.Event.Type == wire.EventDelta }) {
		send(t, m, msg)
	}
	if v := screen(m); !strings.Contains(v, "[agent] assistant: stream▍") || !strings.Contains(v, "agent is working…") {
		t.Fatalf("real-server stream:\n%s", v)
	}
	_, _, err := srv.Chat.Post(ctx, services.PostParams{TimelineScope: "global", Source: "agent", Role: "assistant",
		Content: "streamed answer", Metadata: json.RawMessage(`{"run_id":4}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range col.until(t, "final", isContent("streamed answer")) {
		send(t, m, msg)
	}
	if v := screen(m); strings.Contains(v, "▍") || !strings.Contains(v, "[agent] assistant: streamed answer") {
		t.Fatalf("final over real server:\n%s", v)
	}
}

type fakeConn struct {
	c   *websocket.Conn
	ctx context.Context
}

func acceptWS(w http.ResponseWriter, r *http.Request) (*fakeConn, error) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, err
	}
	return &fakeConn{c: c, ctx: c.CloseRead(r.Context())}, nil
}

func (f *fakeConn) write(s string) error { return f.c.Write(f.ctx, websocket.MessageText, []byte(s)) }
func (f *fakeConn) wait()                { <-f.ctx.Done() }
func (f *fakeConn) CloseNow()            { _ = f.c.CloseNow() }
