package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/switchboard/switchboard/web/wire"
)

// fakeBackend records posts and answers them from a script.
type fakeBackend struct {
	mu      sync.Mutex
	posts   []fakePost
	fail    []error // errors for the next posts, in order; then success
	nextID  int64
	older   map[int64]wire.Page // before id → page
	befores []int64
	results map[string]wire.ToolResult // "run/call" → result
}

type fakePost struct{ content, key string }

func (b *fakeBackend) Post(_ context.Context, content, key string) (wire.Message, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.posts = append(b.posts, fakePost{content, key})
	if len(b.fail) > 0 {
		err := b.fail[0]
		b.fail = b.fail[1:]
		return wire.Message{}, err
	}
	b.nextID++
	return wire.Message{ID: b.nextID, Role: "user", Source: SourceTUI, Content: content, CreatedAt: testNow}, nil
}

func (b *fakeBackend) Upload(_ context.Context, content, key, path string) (wire.Message, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.posts = append(b.posts, fakePost{content + " [" + path + "]", key})
	b.nextID++
	return wire.Message{ID: b.nextID, Role: "user", Source: SourceTUI, Content: content, CreatedAt: testNow}, nil
}

func (b *fakeBackend) ToolResult(_ context.Context, runID int64, callID string) (wire.ToolResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.results[fmt.Sprintf("%d/%s", runID, callID)]
	if !ok {
		return wire.ToolResult{}, fmt.Errorf("not found (404)")
	}
	return r, nil
}

func (b *fakeBackend) Timeline(_ context.Context, q TimelineQuery) (wire.Page, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.befores = append(b.befores, q.Before)
	return b.older[q.Before], nil
}

var (
	testNow = time.Date(2026, 11, 21, 20, 30, 0, 0, time.UTC)
	testLoc = time.FixedZone("UTC+2", 2*3600)
)

func newTestModel(t *testing.T, b Backend, initial wire.Page, w, h int) *Model {
	t.Helper()
	if b == nil {
		b = &fakeBackend{}
	}
	m := NewModel(b, Options{Initial: initial, ServerURL: "http://test", Now: func() time.Time { return testNow }, Location: testLoc})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

func msgAt(id int64, source, role, content string) wire.Message {
	return wire.Message{ID: id, Timeline: "global", Role: role, Source: source, Content: content,
		CreatedAt: time.Date(2026, 11, 21, 20, 1, 0, 0, time.UTC)}
}

// screen is the model's view without colours.
func screen(m *Model) string { return ansi.Strip(m.View()) }

// send feeds msgs to the model and runs the commands they return (and the
// commands those return), skipping ones that wait (ticks, blinks).
func send(t *testing.T, m *Model, msgs ...tea.Msg) {
	t.Helper()
	for _, msg := range msgs {
		_, cmd := m.Update(msg)
		runCmd(t, m, cmd)
	}
}

func runCmd(t *testing.T, m *Model, cmd tea.Cmd) {
	t.Helper()
	if cmd == nil {
		return
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	var msg tea.Msg
	select {
	case msg = <-done:
	case <-time.After(100 * time.Millisecond):
		return // a timer: tests send its message themselves
	}
	switch msg := msg.(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			runCmd(t, m, c)
		}
	case postDoneMsg, olderMsg, resultMsg:
		_, next := m.Update(msg)
		runCmd(t, m, next)
	}
}

func typeText(t *testing.T, m *Model, s string) {
	t.Helper()
	send(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}, tea.KeyMsg{Type: tea.KeyEnter})
}

func linesWith(view, s string) []string {
	var out []string
	for _, l := range strings.Split(view, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func TestModelRendersLabelsRolesAndLocalTime(t *testing.T) {
	t.Parallel()
	page := wire.Page{Messages: []wire.Message{
		msgAt(1, "telegram", "user", "from the phone"),
		msgAt(2, "web", "user", "from the browser"),
		msgAt(3, "tui", "user", "from the terminal"),
		msgAt(4, "api", "user", "from a script"),
		msgAt(5, "system", "system", "Started a new conversation."),
		msgAt(6, "agent", "assistant", "an answer"),
	}}
	yesterday := msgAt(7, "web", "user", "late")
	yesterday.CreatedAt = testNow.Add(24 * time.Hour)
	page.Messages = append(page.Messages, yesterday)
	m := newTestModel(t, nil, page, 100, 30)
	v := screen(m)
	for _, want := range []string{
		"22:01 [telegram] user: from the phone",
		"22:01 [web] user: from the browser",
		"22:01 [tui] user: from the terminal",
		"22:01 [api] user: from a script",
		"22:01 [system] system: Started a new conversation.",
		"22:01 [agent] assistant: an answer",
		"Nov 22 22:30 [web] user: late",
		"— beginning of the timeline —",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	if got := len(strings.Split(m.View(), "\n")); got != 30 {
		t.Errorf("view has %d lines, want the terminal's 30", got)
	}
}

func TestModelOrdersAndDeduplicates(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, nil, wire.Page{Messages: []wire.Message{msgAt(2, "web", "user", "two")}}, 80, 20)
	for _, id := range []int64{5, 3, 2, 5, 4, 3, 1} {
		send(t, m, MessageMsg{Message: msgAt(id, "web", "user", fmt.Sprintf("msg-%d", id))})
	}
	v := screen(m)
	last := -1
	for _, id := range []int{1, 2, 3, 4, 5} {
		text := fmt.Sprintf("msg-%d", id)
		if id == 2 {
			text = "two" // the first copy wins; later ones are the same row
		}
		if n := strings.Count(v, text); n != 1 {
			t.Fatalf("%q appears %d times:\n%s", text, n, v)
		}
		i := strings.Index(v, text)
		if i < last {
			t.Fatalf("%q out of order:\n%s", text, v)
		}
		last = i
	}
	if m.NewestID() != 5 {
		t.Fatalf("newest id %d", m.NewestID())
	}
}

func event(typ string, run int64, d any) EventMsg {
	b, _ := json.Marshal(d)
	return EventMsg{Event: wire.Event{Type: typ, Timeline: "global", RunID: run, Data: b}}
}

func TestModelStreamsDeltasThenFinalMessageReplacesThem(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, nil, wire.Page{Messages: []wire.Message{msgAt(1, "tui", "user", "question")}}, 80, 20)
	send(t, m, ConnMsg{State: Live}, event(wire.EventRun, 7, map[string]string{"status": "queued"}))
	if v := screen(m); !strings.Contains(v, "agent run queued") {
		t.Fatalf("queued run not shown:\n%s", v)
	}
	send(t, m, event(wire.EventRun, 7, map[string]string{"status": "running"}),
		event(wire.EventDelta, 7, map[string]string{"text": "The answer "}),
		event(wire.EventDelta, 7, map[string]string{"text": "is forty-two"}))
	v := screen(m)
	if !strings.Contains(v, "[agent] assistant: The answer is forty-two▍") || !strings.Contains(v, "agent is working…") {
		t.Fatalf("streaming bubble or working status missing:\n%s", v)
	}
	final := msgAt(2, "agent", "assistant", "The answer is forty-two.")
	final.Metadata = json.RawMessage(`{"run_id":7}`)
	send(t, m, MessageMsg{Message: final}, event(wire.EventRun, 7, map[string]string{"status": "ok"}),
		event(wire.EventDelta, 7, map[string]string{"text": " (late)"}))
	v = screen(m)
	if strings.Contains(v, "▍") || strings.Contains(v, "late") || strings.Count(v, "The answer is forty-two") != 1 {
		t.Fatalf("final message did not replace the bubble:\n%s", v)
	}
	if !strings.Contains(v, "22:01 [agent] assistant: The answer is forty-two.") || strings.Contains(v, "working") {
		t.Fatalf("final answer or status wrong:\n%s", v)
	}

	// A run that fails keeps what it streamed, marked, and says so.
	send(t, m, event(wire.EventDelta, 8, map[string]string{"text": "half an"}), event(wire.EventRun, 8, map[string]string{"status": "timeout"}))
	v = screen(m)
	if !strings.Contains(v, "half an [timeout]") || !strings.Contains(v, "agent run 8 ended: timeout") {
		t.Fatalf("failed run:\n%s", v)
	}
}

func TestModelHandoffMarker(t *testing.T) {
	t.Parallel()
	h := msgAt(3, "agent", "assistant", "Found three papers on compaction.\n\n## Details\nlong text")
	h.AgentID = "researcher"
	h.Metadata = json.RawMessage(`{"kind":"handoff","run_id":12}`)
	m := newTestModel(t, nil, wire.Page{}, 80, 20)
	send(t, m, MessageMsg{Message: h})
	v := screen(m)
	if !strings.Contains(v, "22:01 ⇄ handoff from researcher: Found three papers on compaction.") {
		t.Fatalf("handoff marker missing:\n%s", v)
	}
	if strings.Contains(v, "Details") || strings.Contains(v, "[agent]") {
		t.Fatalf("handoff not compact:\n%s", v)
	}
	// Narrow terminals truncate the marker to one line.
	send(t, m, tea.WindowSizeMsg{Width: 30, Height: 10})
	if got := linesWith(screen(m), "⇄"); len(got) != 1 || ansi.StringWidth(got[0]) > 30 || !strings.HasSuffix(strings.TrimRight(got[0], " "), "…") {
		t.Fatalf("narrow handoff: %q", got)
	}
}

func TestModelResize(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 40)
	m := newTestModel(t, nil, wire.Page{Messages: []wire.Message{msgAt(1, "web", "user", long)}}, 40, 20)
	narrow := len(linesWith(screen(m), "word"))
	for _, l := range strings.Split(screen(m), "\n") {
		if w := ansi.StringWidth(l); w > 40 {
			t.Fatalf("line wider than 40 (%d): %q", w, l)
		}
	}
	send(t, m, tea.WindowSizeMsg{Width: 120, Height: 12})
	wide := len(linesWith(screen(m), "word"))
	if narrow <= wide || wide < 2 {
		t.Fatalf("wrapping did not follow the width: %d lines at 40, %d at 120", narrow, wide)
	}
	if got := len(strings.Split(m.View(), "\n")); got != 12 {
		t.Fatalf("view has %d lines, want 12", got)
	}
	for _, l := range strings.Split(screen(m), "\n") {
		if w := ansi.StringWidth(l); w > 120 {
			t.Fatalf("line wider than 120: %q", l)
		}
	}
}

func statusOf(m *Model) string {
	lines := strings.Split(screen(m), "\n")
	return lines[len(lines)-1-composerHeight]
}

func TestModelConnectionStatusLine(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, nil, wire.Page{}, 80, 20)
	if s := statusOf(m); !strings.Contains(s, "connecting…") {
		t.Fatalf("initial status %q", s)
	}
	send(t, m, ConnMsg{State: Live})
	if s := statusOf(m); !strings.Contains(s, "● live") {
		t.Fatalf("live status %q", s)
	}
	send(t, m, ConnMsg{State: Offline, Err: errors.New("connection lost: connection refused")})
	if s := statusOf(m); !strings.Contains(s, "offline — reconnecting…") || !strings.Contains(s, "connection refused") || strings.Contains(s, "live") {
		t.Fatalf("offline status %q", s)
	}
	send(t, m, ConnMsg{State: Live})
	if s := statusOf(m); !strings.Contains(s, "● live") || strings.Contains(s, "offline") {
		t.Fatalf("back live %q", s)
	}
	// A bad wire.Frame is reported once, counted, and nothing else changes.
	send(t, m, ProtocolErrorMsg{Err: errors.New("bad JSON frame: x")}, ProtocolErrorMsg{Err: errors.New("bad JSON frame: x")})
	if s := statusOf(m); !strings.Contains(s, "protocol error, wire.Frame skipped: bad JSON frame: x (×2)") || !strings.Contains(s, "live") {
		t.Fatalf("protocol error status %q", s)
	}
}

func TestModelPostsWithSourceTUIAndRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	refused := &ReachError{URL: "http://test", Reason: "connection refused", Err: syscall.ECONNREFUSED}
	b := &fakeBackend{fail: []error{refused, &APIError{Status: 503, Message: "database unavailable"}}, nextID: 10}
	m := newTestModel(t, b, wire.Page{}, 120, 20)
	send(t, m, ConnMsg{State: Offline, Err: errors.New("connection refused")})
	typeText(t, m, "typed while offline")
	v := screen(m)
	if !strings.Contains(v, "typed while offline (not sent yet, will retry: connection refused)") || !strings.Contains(statusOf(m), "1 unsent") {
		t.Fatalf("pending post not shown:\n%s", v)
	}
	if m.Draft() != "" {
		t.Fatalf("composer not cleared: %q", m.Draft())
	}
	send(t, m, retryPostMsg{}) // the backoff timer fires: 503
	send(t, m, ConnMsg{State: Live})
	v = screen(m)
	if len(b.posts) != 3 {
		t.Fatalf("%d attempts, want 3", len(b.posts))
	}
	for _, p := range b.posts {
		if p.key != b.posts[0].key || p.content != "typed while offline" {
			t.Fatalf("retry changed the post: %+v", b.posts)
		}
	}
	if got := linesWith(v, "typed while offline"); len(got) != 1 || !strings.Contains(got[0], "[tui] user: typed while offline") || strings.Contains(got[0], "not sent") {
		t.Fatalf("after success: %q\n%s", got, v)
	}
	// The same message arriving on the websocket is not shown twice.
	send(t, m, MessageMsg{Message: wire.Message{ID: 11, Role: "user", Source: "tui", Content: "typed while offline", CreatedAt: testNow}})
	if n := strings.Count(screen(m), "typed while offline"); n != 1 {
		t.Fatalf("shown %d times", n)
	}
	if len(m.Unsent()) != 0 || strings.Contains(statusOf(m), "unsent") {
		t.Fatal("outbox not empty")
	}
	// Two new keys for two posts.
	typeText(t, m, "second")
	if b.posts[3].key == b.posts[0].key {
		t.Fatal("a new post reused a key")
	}
}

func TestModelRejectedPostGoesBackToTheComposer(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{fail: []error{&APIError{Status: 413, Message: "message is over 32768 bytes"}}}
	m := newTestModel(t, b, wire.Page{}, 80, 20)
	typeText(t, m, "too big")
	if m.Draft() != "too big" || len(m.Unsent()) != 0 {
		t.Fatalf("draft %q, unsent %v", m.Draft(), m.Unsent())
	}
	if s := statusOf(m); !strings.Contains(s, "not sent (kept in the composer): server answered 413") {
		t.Fatalf("status %q", s)
	}
}

func TestModelLocalCommands(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{}
	m := newTestModel(t, b, wire.Page{}, 90, 40)
	typeText(t, m, "/help")
	v := screen(m)
	for _, c := range []string{"/new", "/stop", "/status", "/context", "/compact [focus]", "/subagents", "/quit"} {
		if !strings.Contains(v, c) {
			t.Fatalf("help lacks %s:\n%s", c, v)
		}
	}
	typeText(t, m, "/status")
	if len(b.posts) != 1 || b.posts[0].content != "/status" {
		t.Fatalf("chat commands are messages: %+v", b.posts)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/quit")})
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if cmd == nil {
		t.Fatal("/quit returned no command")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("/quit does not quit")
	}
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("Ctrl+C does not quit")
	}
}

func TestModelScrollbackLoadsOlderPages(t *testing.T) {
	t.Parallel()
	var newest, older []wire.Message
	for i := int64(51); i <= 100; i++ {
		newest = append(newest, msgAt(i, "web", "user", fmt.Sprintf("m%03d", i)))
	}
	for i := int64(30); i <= 50; i++ {
		older = append(older, msgAt(i, "telegram", "user", fmt.Sprintf("m%03d", i)))
	}
	b := &fakeBackend{older: map[int64]wire.Page{51: {Messages: older, HasOlder: false}}}
	m := newTestModel(t, b, wire.Page{Messages: newest, HasOlder: true}, 80, 20)
	if v := screen(m); !strings.Contains(v, "m100") || strings.Contains(v, "m051") {
		t.Fatalf("not following the newest:\n%s", v)
	}
	for i := 0; i < 10 && len(b.befores) == 0; i++ {
		send(t, m, tea.KeyMsg{Type: tea.KeyPgUp})
	}
	if len(b.befores) != 1 || b.befores[0] != 51 {
		t.Fatalf("older pages asked: %v", b.befores)
	}
	v := screen(m)
	if !strings.Contains(v, "m051") {
		t.Fatalf("the view jumped after loading older messages:\n%s", v)
	}
	// Wheel to the top: the older page is there, and the beginning marker.
	for i := 0; i < 40; i++ {
		send(t, m, tea.MouseMsg{Action: tea.MouseActionPress, Button: tea.MouseButtonWheelUp})
	}
	v = screen(m)
	if !strings.Contains(v, "— beginning of the timeline —") || !strings.Contains(v, "[telegram] user: m030") {
		t.Fatalf("top of the timeline:\n%s", v)
	}
	if len(b.befores) != 1 {
		t.Fatalf("asked again with nothing older: %v", b.befores)
	}
	// A live message while scrolled up does not yank the view down.
	send(t, m, MessageMsg{Message: msgAt(101, "web", "user", "m101")})
	if v := screen(m); strings.Contains(v, "m101") {
		t.Fatalf("view followed while scrolled up:\n%s", v)
	}
	send(t, m, tea.KeyMsg{Type: tea.KeyCtrlEnd})
	if v := screen(m); !strings.Contains(v, "m101") {
		t.Fatalf("Ctrl+End did not jump to the newest:\n%s", v)
	}
}

func TestSanitizeStripsTerminalEscapes(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, nil, wire.Page{Messages: []wire.Message{msgAt(1, "telegram", "user", "evil\x1b]0;pwned\x07\x1b[2Jtext\ttab")}}, 80, 10)
	v := m.View()
	if strings.Contains(v, "\x1b]0") || strings.Contains(v, "\x1b[2J") || !strings.Contains(ansi.Strip(v), "evil]0;pwned[2Jtext tab") {
		t.Fatalf("escape sequences reached the terminal: %q", v)
	}
}

func FuzzRenderMessage(f *testing.F) {
	f.Add("hello\nworld", `{"kind":"handoff"}`, 40)
	f.Add("\x1b[31mred", `{"run_id":"x"}`, 5)
	f.Fuzz(func(t *testing.T, content, meta string, width int) {
		if width < 0 || width > 500 {
			return
		}
		m := wire.Message{ID: 1, Role: "user", Source: "web", Content: content, Metadata: json.RawMessage(meta), CreatedAt: testNow}
		out := renderMessage(m, width, testNow, testLoc, "http://test")
		if strings.ContainsRune(ansi.Strip(out), '\x1b') {
			t.Fatalf("escape in output: %q", out)
		}
		for _, l := range strings.Split(ansi.Strip(out), "\n") {
			if w := ansi.StringWidth(l); w > max(width, 10) {
				t.Fatalf("line of width %d > %d: %q", w, width, l)
			}
		}
	})
}

// The websocket can deliver the stored copy of a post before the POST's own
// answer: the pending line must give way at once, not show the text twice.
func TestModelStoredCopyOvertakesThePostAnswer(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, &fakeBackend{nextID: 10}, wire.Page{}, 120, 20)
	m.posting = true
	m.outbox = []pendingPost{{content: "racing post", key: "k1"}}
	send(t, m, MessageMsg{Message: wire.Message{ID: 11, Role: "user", Source: "tui", Content: "racing post", CreatedAt: testNow}})
	if n := strings.Count(screen(m), "racing post"); n != 1 {
		t.Fatalf("shown %d times while the POST answer is on its way:\n%s", n, screen(m))
	}
}

// TestModelApprovalShowsItsDecision: an approval's request shows its held
// call and what to type; the notice of a decision made on another channel
// (here Telegram) updates the request, which no longer asks; an older
// state arriving late does not take it back.
func TestModelApprovalShowsItsDecision(t *testing.T) {
	t.Parallel()
	req := msgAt(3, "system", "assistant", "Approve #7? fetch_url {} (egress)")
	req.Metadata = json.RawMessage(`{"notice":"approval","approval_id":7,"run_id":2}`)
	req.Tools = []wire.ToolUse{{ID: "c1", Name: "fetch_url", Arg: "example.test/?q=1", Status: "running"}}
	pending := wire.Approval{ID: 7, CallID: "c1", Tool: "fetch_url", Arguments: `{}`, Effect: "egress", State: "pending"}
	req.Approval = &pending
	m := newTestModel(t, nil, wire.Page{Messages: []wire.Message{req}}, 100, 20)
	v := screen(m)
	if !strings.Contains(v, "⚙ fetch_url example.test/?q=1 · waiting for your approval") || !strings.Contains(v, "⏸ waiting for your decision: /approve 7 or /deny 7") {
		t.Fatalf("the request:\n%s", v)
	}
	decided := msgAt(4, "system", "assistant", "#7 denied: fetch_url (via telegram).")
	decided.Metadata = json.RawMessage(`{"notice":"approval_decided","approval_id":7,"run_id":2}`)
	decided.Tools = req.Tools
	denied := pending
	denied.State, denied.DecidedBy = "denied", "telegram"
	decided.Approval = &denied
	send(t, m, MessageMsg{Message: decided})
	v = screen(m)
	if !strings.Contains(v, "✗ denied via telegram") || strings.Contains(v, "waiting for your") || strings.Count(v, "⚙ fetch_url") != 1 {
		t.Fatalf("after the decision:\n%s", v)
	}
	late := msgAt(5, "system", "assistant", "an old copy")
	late.Metadata = json.RawMessage(`{"notice":"approval_decided","approval_id":7}`)
	late.Approval = &pending
	send(t, m, MessageMsg{Message: late})
	if v = screen(m); !strings.Contains(v, "✗ denied via telegram") || strings.Contains(v, "waiting for your decision") {
		t.Fatalf("a late older state took the decision back:\n%s", v)
	}
}

// TestResultShowsTheLastToolCallsResult: /result fetches what the newest
// finished tool call returned (its run from the answer's metadata) and
// shows it on screen, at most 40 lines, saying there is more; before any
// tool call it says there is none, and nothing is sent to the agent.
func TestResultShowsTheLastToolCallsResult(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{results: map[string]wire.ToolResult{}}
	var long []string
	for i := 1; i <= 60; i++ {
		long = append(long, fmt.Sprintf("line %d of the file", i))
	}
	b.results["7/call_2"] = wire.ToolResult{RunID: 7, CallID: "call_2", Tool: "read_file", Content: strings.Join(long, "\n"), Chars: 1200}
	m := newTestModel(t, b, wire.Page{Messages: []wire.Message{msgAt(1, "web", "user", "hello")}}, 100, 80)
	typeText(t, m, "/result")
	if got := screen(m); !strings.Contains(got, "no finished tool call on the timeline yet") {
		t.Fatalf("before any tool call:\n%s", got)
	}
	answer := msgAt(2, "agent", "assistant", "Here is the file.")
	answer.Metadata = []byte(`{"run_id":7,"reply_to":1}`)
	answer.Tools = []wire.ToolUse{{ID: "call_1", Name: "list_files", Status: "ok"}, {ID: "call_2", Name: "read_file", Arg: "notes.md", Status: "ok"},
		{ID: "call_3", Name: "fetch_url", Status: "running"}}
	send(t, m, MessageMsg{Message: answer})
	typeText(t, m, "/result")
	got := screen(m)
	for _, want := range []string{"Result of read_file notes.md:", "line 1 of the file", "line 40 of the file", "1200 characters in all"} {
		if !strings.Contains(got, want) {
			t.Fatalf("%q not on screen:\n%s", want, got)
		}
	}
	if strings.Contains(got, "line 41 of the file") {
		t.Fatalf("more than 40 lines shown:\n%s", got)
	}
	if len(b.posts) != 0 {
		t.Fatalf("/result was sent to the agent: %+v", b.posts)
	}
}

// TestModelRunStatusGivesWayToLaterRuns: a run that ends waiting for an
// approval says so in the status line until its held call is decided; a
// run that ended badly is said until a later run's status (queued, running,
// ok) replaces it; an earlier run's late status does not hide a later one's.
func TestModelRunStatusGivesWayToLaterRuns(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, nil, wire.Page{Messages: []wire.Message{msgAt(1, "tui", "user", "read the news")}}, 120, 20)
	send(t, m, ConnMsg{State: Live}, event(wire.EventRun, 14, map[string]string{"status": "running"}))
	req := msgAt(2, "system", "assistant", "Approve #7? fetch_url {} (egress)")
	req.Metadata = json.RawMessage(`{"notice":"approval","approval_id":7,"run_id":14}`)
	pending := wire.Approval{ID: 7, CallID: "c1", Tool: "fetch_url", State: "pending"}
	req.Approval = &pending
	send(t, m, MessageMsg{Message: req}, event(wire.EventRun, 14, map[string]string{"status": "waiting"}))
	if s := statusOf(m); !strings.Contains(s, "agent run 14 is waiting for your approval") || strings.Contains(s, "working") {
		t.Fatalf("a run waiting for an approval: %q", s)
	}
	// Chatting on meanwhile: run 15 runs and ends ok; the approval still waits.
	send(t, m, MessageMsg{Message: msgAt(3, "tui", "user", "meanwhile")}, event(wire.EventRun, 15, map[string]string{"status": "running"}))
	if s := statusOf(m); !strings.Contains(s, "agent is working…") || strings.Contains(s, "run 14") {
		t.Fatalf("a later run's status did not replace the waiting one: %q", s)
	}
	send(t, m, event(wire.EventRun, 15, map[string]string{"status": "ok"}))
	if s := statusOf(m); strings.Contains(s, "run 1") || strings.Contains(s, "working") {
		t.Fatalf("after run 15 ended ok: %q", s)
	}

	// Run 16 waits; its held call is denied (on any channel): the line goes.
	send(t, m, event(wire.EventRun, 16, map[string]string{"status": "waiting"}))
	req2 := msgAt(4, "system", "assistant", "Approve #8? fetch_url {} (egress)")
	req2.Metadata = json.RawMessage(`{"notice":"approval","approval_id":8,"run_id":16}`)
	held := wire.Approval{ID: 8, CallID: "c2", Tool: "fetch_url", State: "pending"}
	req2.Approval = &held
	send(t, m, MessageMsg{Message: req2})
	if s := statusOf(m); !strings.Contains(s, "agent run 16 is waiting for your approval") {
		t.Fatalf("run 16 waiting: %q", s)
	}
	decided := msgAt(5, "system", "assistant", "#8 denied: fetch_url (via web).")
	decided.Metadata = json.RawMessage(`{"notice":"approval_decided","approval_id":8,"run_id":16}`)
	denied := held
	denied.State, denied.DecidedBy = "denied", "web"
	decided.Approval = &denied
	send(t, m, MessageMsg{Message: decided})
	if s := statusOf(m); strings.Contains(s, "run 16") || !strings.Contains(s, "http://test · /help") {
		t.Fatalf("a decided approval left the status: %q", s)
	}

	// A run that fails is said until a later run's status; an earlier
	// run's late event does not clear it.
	send(t, m, event(wire.EventRun, 18, map[string]string{"status": "error"}), event(wire.EventRun, 17, map[string]string{"status": "ok"}))
	if s := statusOf(m); !strings.Contains(s, "agent run 18 ended: error") {
		t.Fatalf("a failed run: %q", s)
	}
	send(t, m, event(wire.EventRun, 19, map[string]string{"status": "queued"}))
	if s := statusOf(m); strings.Contains(s, "run 18") || !strings.Contains(s, "agent run queued…") {
		t.Fatalf("a queued later run did not replace the failure: %q", s)
	}
}

// TestModelHelpAlignsAndWraps: /help puts every command's text in one
// column, past the longest command, and wraps long texts (/budget's) under
// that column, never back to column 0 nor past the terminal's width.
func TestModelHelpAlignsAndWraps(t *testing.T) {
	t.Parallel()
	for _, width := range []int{80, 100, 120} {
		m := newTestModel(t, nil, wire.Page{}, width, 80)
		typeText(t, m, "/help")
		lines := strings.Split(screen(m), "\n")
		first := -1
		for i, l := range lines {
			if strings.HasPrefix(l, "Commands (sent to the agent") {
				first = i
			}
		}
		if first < 0 {
			t.Fatalf("width %d: no help:\n%s", width, screen(m))
		}
		col := -1
		rows := map[string]string{} // usage → its text, lines joined
		usage := ""
		keys := false
		for _, l := range lines[first+1:] {
			l = strings.TrimRight(l, " ") // the viewport pads lines to its width
			if keys || strings.HasPrefix(l, "Keys:") {
				if l == "" || strings.HasPrefix(l, "›") || strings.Contains(l, "http://test · /help") {
					break // the note ends
				}
				if keys && !strings.HasPrefix(l, "      ") || ansi.StringWidth(l) > width {
					t.Fatalf("width %d: the keys' line wrapped without its indent: %q", width, l)
				}
				keys = true
				continue
			}
			if w := ansi.StringWidth(l); w > width {
				t.Fatalf("width %d: line of %d columns: %q", width, w, l)
			}
			if l == "Local:" {
				continue
			}
			if strings.HasPrefix(l, "  /") {
				// "  /usage  text": the text starts after two spaces.
				i := strings.Index(l[2:], "  ") + 2
				j := i + len(l[i:]) - len(strings.TrimLeft(l[i:], " "))
				c := ansi.StringWidth(l[:j])
				if col < 0 {
					col = c
				}
				if c != col {
					t.Fatalf("width %d: %q has its text at column %d, others at %d:\n%s", width, l, c, col, strings.Join(lines[first:], "\n"))
				}
				usage = strings.TrimSpace(l[:i])
				rows[usage] = strings.TrimSpace(l[j:])
				continue
			}
			if trimmed := strings.TrimLeft(l, " "); len(l)-len(trimmed) != col || usage == "" {
				t.Fatalf("width %d: a wrapped line not under the text column %d: %q\n%s", width, col, l, strings.Join(lines[first:], "\n"))
			} else {
				rows[usage] += " " + trimmed
			}
		}
		budget := "today's spend (tokens, and dollars for priced models) per kind of run against the daily budgets, and the last 7 days"
		if rows["/budget"] != budget || rows["/rules [add|remove|approve|reject …]"] != "the standing rules, and rule proposals" ||
			rows["/quit, Ctrl+C"] != "leave" {
			t.Fatalf("width %d: rows %q", width, rows)
		}
	}
}

// TestModelAcceptedPostClearsWhatWasWrongWithTheLastOne: an /attach of a
// path that is not there is named in the status line until a post is
// accepted (an /attach of a file, a message); other notices stay.
func TestModelAcceptedPostClearsWhatWasWrongWithTheLastOne(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{}
	m := newTestModel(t, b, wire.Page{}, 120, 20)
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("remember milk"), 0o600); err != nil {
		t.Fatal(err)
	}
	typeText(t, m, "/attach /nonexistent/file.txt")
	if s := statusOf(m); !strings.Contains(s, "not attached: /nonexistent/file.txt") {
		t.Fatalf("missing file: %q", s)
	}
	m.ta.Reset()
	typeText(t, m, "/attach "+path)
	if s := statusOf(m); strings.Contains(s, "not attached") || len(b.posts) != 1 {
		t.Fatalf("after a file was attached: %q, posts %+v", s, b.posts)
	}
	typeText(t, m, "/attach /nonexistent/file.txt")
	m.ta.Reset()
	typeText(t, m, "plain text")
	if s := statusOf(m); strings.Contains(s, "not attached") || len(b.posts) != 2 {
		t.Fatalf("after a message was sent: %q, posts %+v", s, b.posts)
	}
	// A notice not about what was typed, even one that came after such a
	// notice, stays.
	typeText(t, m, "/attach /nonexistent/file.txt")
	m.ta.Reset()
	send(t, m, ProtocolErrorMsg{Err: errors.New("bad JSON frame: x")})
	typeText(t, m, "more text")
	if s := statusOf(m); !strings.Contains(s, "protocol error") {
		t.Fatalf("a send cleared a notice not about sending: %q", s)
	}
}
