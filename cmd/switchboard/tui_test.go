package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/servetest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func TestTUIHelpAndStartErrors(t *testing.T) {
	ctx := context.Background()
	var out, errOut strings.Builder
	if err := run(ctx, []string{"tui", "--help"}, env(nil), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--url", "SWITCHBOARD_URL", "http://127.0.0.1:8080", "--token", "SWITCHBOARD_TOKEN"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tui --help lacks %q:\n%s", want, out.String())
		}
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	err := run(ctx, []string{"tui", "--url", dead}, env(map[string]string{"SWITCHBOARD_TOKEN": "x"}), &out, &errOut)
	if err == nil || err.Error() != "cannot reach "+dead+": connection refused" {
		t.Fatalf("unreachable server: %v", err)
	}
	err = run(ctx, []string{"tui"}, env(map[string]string{"SWITCHBOARD_URL": dead}), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	if err := run(ctx, []string{"tui", "--frobnicate"}, env(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Fatalf("bad flag: %v", err)
	}
}

var (
	freePort     = servetest.FreePort
	startServeAt = servetest.StartAt
)

// tmuxSession is one detached tmux session on a private tmux server.
type tmuxSession struct {
	t      *testing.T
	socket string
	// expect are messages no screen may ever show twice.
	expect []struct{ label, text string }
}

func newTmux(t *testing.T, width, height int, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is required in CI: ", err)
		}
		t.Skip("tmux not installed")
	}
	s := &tmuxSession{t: t, socket: fmt.Sprintf("sbtui-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	s.run("-f", "/dev/null", "new-session", "-d", "-s", "tui", "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), command)
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// capture returns the pane's text, failing if any expected message is on
// it twice.
//
// A capture taken while the terminal redraws can hold lines of the frame
// before (a torn frame: a list cut mid-line, then begun again), so a
// message seen twice is looked at again; only a screen that still shows it
// twice after the redraw has settled fails.
func (s *tmuxSession) capture() string {
	s.t.Helper()
	screen := s.run("capture-pane", "-p", "-t", "tui")
	twice := s.shownTwice(screen)
	if twice == "" {
		return screen
	}
	// Looked at again every 300 ms while the redraw settles.
	if !pollEvery(5*time.Second, 300*time.Millisecond, func() bool {
		screen = s.run("capture-pane", "-p", "-t", "tui")
		twice = s.shownTwice(screen)
		return twice == ""
	}) {
		s.t.Fatalf("%s:\n%s", twice, screen)
	}
	return screen
}

// shownTwice says which expected message screen shows more than once ("":
// none).
func (s *tmuxSession) shownTwice(screen string) string {
	twice := ""
	for _, m := range s.expect {
		if n := labelled(screen, m.label, m.text); n > 1 {
			twice = fmt.Sprintf("%q shown %d times", m.text, n)
		}
	}
	return twice
}

// scan scrolls from the newest message to the beginning of the timeline
// (PgUp), returning which expected messages it saw with their labels.
func (s *tmuxSession) scan() map[string]bool {
	s.t.Helper()
	seen := map[string]bool{}
	s.run("send-keys", "-t", "tui", "C-End")
	prev := ""
	for i := 0; i < 60; i++ {
		screen := s.capture()
		if screen == prev && i > 0 {
			// Not redrawn yet: wait for the page to change.
			if !pollEvery(10*time.Second, 100*time.Millisecond, func() bool { screen = s.capture(); return screen != prev }) {
				break
			}
		}
		prev = screen
		for _, m := range s.expect {
			if labelled(screen, m.label, m.text) == 1 {
				seen[m.text] = true
			}
		}
		if strings.Contains(screen, "— beginning of the timeline —") {
			return seen
		}
		s.run("send-keys", "-t", "tui", "PPage")
	}
	s.t.Fatalf("never reached the beginning of the timeline; last screen:\n%s", prev)
	return nil
}

// typeLine types text literally, then Enter.
func (s *tmuxSession) typeLine(text string) {
	s.run("send-keys", "-t", "tui", "-l", text)
	s.run("send-keys", "-t", "tui", "Enter")
}

// waitFor polls the pane until ok holds, failing with the last screen.
func (s *tmuxSession) waitFor(what string, ok func(screen string) bool) string {
	s.t.Helper()
	var screen string
	if !pollEvery(30*time.Second, 100*time.Millisecond, func() bool { screen = s.capture(); return ok(screen) }) {
		s.t.Fatalf("the TUI never showed %s; screen:\n%s", what, screen)
	}
	return screen
}

// labelled counts the pane's lines showing text as a message with label.
func labelled(screen, label, text string) int {
	n := 0
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "["+label+"] user: "+text) {
			n++
		}
	}
	return n
}

func statusLine(screen string) string {
	for _, l := range strings.Split(screen, "\n") {
		for _, p := range []string{"● live", "○ offline", "◌ connecting"} {
			if strings.HasPrefix(strings.TrimSpace(l), p) {
				return l
			}
		}
	}
	return ""
}

func postAsWeb(t *testing.T, base, token, content string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"content": content, "source": "web"})
	req, _ := http.NewRequest("POST", base+"/api/messages", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("post: %d %s", resp.StatusCode, body)
	}
}

// storedCount is how many visible user messages with this text the server holds.
func storedCount(t *testing.T, base, token, content string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/timeline?limit=500", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range page.Messages {
		if m.Role == "user" && m.Content == content {
			n++
		}
	}
	return n
}

// expected are the messages TestTUIInTmux sends, with the label each must show.
var expected = []struct{ label, text string }{
	{"web", "history from the web"}, {"tui", "hello from tmux"}, {"web", "posted live from the web"},
	{"tui", "typed while offline"}, {"web", "posted while the TUI was offline"},
}

// TestTUIInTmux drives the real binary in a terminal: it sends a message,
// follows the web live, survives a server crash and restart on the same
// database and port, and catches up without gaps or repeats.
func TestTUIInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux not installed")
	}
	bin := buildBinary(t)
	db := migratedDB(t)
	const token = "tui-e2e-owner-token-0123456789"
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	server := startServeAt(t, bin, db, addr, "WEB_AUTH_TOKEN="+token)
	postAsWeb(t, base, token, "history from the web")

	// The shell keeps the pane open if the TUI exits, so its last words show.
	// Tall enough that the offline model's long answers do not scroll a
	// message off the screen before it is looked for.
	tm := newTmux(t, 100, 60, fmt.Sprintf("%q tui --url %q --token %q; echo \"[tui exited: $?]\"; sleep 600", bin, base, token))
	tm.expect = expected
	tm.waitFor("the history and the live status", func(s string) bool {
		return labelled(s, "web", "history from the web") == 1 && strings.Contains(statusLine(s), "● live")
	})

	tm.typeLine("hello from tmux")
	tm.waitFor("the sent message labelled tui", func(s string) bool {
		return labelled(s, "tui", "hello from tmux") == 1 && !strings.Contains(s, "sending…")
	})

	postAsWeb(t, base, token, "posted live from the web")
	tm.waitFor("a web message arriving live", func(s string) bool { return labelled(s, "web", "posted live from the web") == 1 })

	// Crash the server.
	if err := server.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("the offline status", func(s string) bool {
		return strings.Contains(statusLine(s), "offline — reconnecting…")
	})
	tm.typeLine("typed while offline")
	offline := tm.waitFor("the unsent post kept", func(s string) bool {
		return strings.Contains(s, "typed while offline (not sent yet") && strings.Contains(statusLine(s), "1 unsent")
	})

	// A new process on the same database and port; a message stored before
	// the TUI (in backoff) reconnects must arrive from the backlog.
	startServeAt(t, bin, db, addr, "WEB_AUTH_TOKEN="+token)
	postAsWeb(t, base, token, "posted while the TUI was offline")
	tm.waitFor("live again, caught up, nothing unsent", func(s string) bool {
		st := statusLine(s)
		return strings.HasPrefix(strings.TrimSpace(st), "● live") && !strings.Contains(st, "unsent") && !strings.Contains(st, "working")
	})
	// The agent (offline model) may have answered each message at length,
	// so scroll back through the whole timeline to find every message.
	shown := tm.scan()
	for _, m := range expected {
		if !shown[m.text] {
			t.Errorf("%q [%s] never shown while scrolling back", m.text, m.label)
		}
		if n := storedCount(t, base, token, m.text); n != 1 {
			t.Errorf("%q stored %d times", m.text, n)
		}
	}
	tm.run("send-keys", "-t", "tui", "C-End")
	screen := tm.waitFor("the newest message again", func(s string) bool { return !strings.Contains(s, "beginning of the timeline") })
	// TUI_SCREEN_DIR=dir saves the two screens shown in docs/TUI.md.
	if dir := os.Getenv("TUI_SCREEN_DIR"); dir != "" {
		_ = os.WriteFile(dir+"/offline.txt", []byte(offline), 0o644)
		_ = os.WriteFile(dir+"/live.txt", []byte(screen), 0o644)
	}

	tm.typeLine("/quit")
	tm.waitFor("the TUI exiting cleanly", func(s string) bool { return strings.Contains(s, "[tui exited: 0]") })
}

// TestTUIMarkdownAndToolActivityInTmux: in tmux, against the real binary
// and the fake model (in its tool-calling mode), the running answer shows
// its tool call live, and the stored answer is Markdown rendered for the
// terminal (bullets, a code block behind a bar, a link with its URL) with
// the tool call under it; /result then shows what that call returned.
func TestTUIMarkdownAndToolActivityInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux not installed")
	}
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Call("write_file", `{"path":"notes.md","content":"meeting on Tuesday"}`),
		llmtest.Reply{Text: "Done:\n\n- wrote **notes.md**\n- kept it short\n\n```sh\ncat notes.md\n```\n\nSee [the guide](https://example.test/guide).",
			Delay: 2 * time.Second})
	const token = "tui-md-owner-token-0123456789"
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// write_file in main's core: with sub-agents on (the default) main's
	// default core is the coordinator set, and the scripted model calls it
	// without find_tools.
	startServeAt(t, bin, db, addr, "WEB_AUTH_TOKEN="+token, "LLM_PROVIDER=openai", "LLM_BASE_URL="+model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-test", "TOOLS_CORE=write_file,delegate,recall_search")
	tm := newTmux(t, 100, 30, fmt.Sprintf("%q tui --url %q --token %q; sleep 600", bin, "http://"+addr, token))
	tm.waitFor("the live status", func(s string) bool { return strings.Contains(statusLine(s), "● live") })
	tm.typeLine("write my notes")
	tm.waitFor("the tool call while the answer is written", func(s string) bool {
		return strings.Contains(s, "⚙ write_file notes.md · ok") && !strings.Contains(s, "Done:")
	})
	// The stored answer replaces the streamed one (whose cursor is ▍).
	screen := tm.waitFor("the rendered answer", func(s string) bool { return strings.Contains(s, "Done:") && !strings.Contains(s, "▍") })
	for _, want := range []string{"• wrote notes.md", "• kept it short", "┌ sh", "│ cat notes.md", "the guide (https://example.test/guide)", "⚙ write_file notes.md · ok"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the answer lacks %q:\n%s", want, screen)
		}
	}
	if strings.Contains(screen, "**notes.md**") || strings.Contains(screen, "```") {
		t.Errorf("raw Markdown on the screen:\n%s", screen)
	}
	// /result shows what that call returned (fetched from the server),
	// and sends nothing.
	tm.typeLine("/result")
	tm.waitFor("the tool's result", func(s string) bool {
		return strings.Contains(s, "Result of write_file notes.md:") && strings.Contains(s, "notes.md")
	})
}

// TestTUIShowsScheduleNotificationOnce: a monitor's notification arrives in
// the TUI live, labelled schedule, once, although later fires find the
// same.
func TestTUIShowsScheduleNotificationOnce(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux not installed")
	}
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	var fires atomic.Int64
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), "Scheduled task") {
			fires.Add(1)
			return llmtest.Text("Tickets are on sale.")
		}
		return llmtest.Echo(r)
	})
	const token = "tui-sched-owner-token-0123456789"
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	startServeAt(t, bin, db, addr, "WEB_AUTH_TOKEN="+token, "LLM_PROVIDER=openai", "LLM_BASE_URL="+model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-test", "SCHEDULE_MIN_INTERVAL=1s",
		"AGENT_CONTEXT_SCOPED_WRITE=1", "AGENT_CONTEXT_SCOPED_READ=1")
	tm := newTmux(t, 100, 30, fmt.Sprintf("%q tui --url %q --token %q; sleep 600", bin, base, token))
	tm.waitFor("the live status", func(s string) bool { return strings.Contains(statusLine(s), "● live") })
	req, _ := http.NewRequest("POST", base+"/api/schedules", strings.NewReader(`{"name":"Tickets","task":"check the box office","every":"1s"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	tm.waitFor("the notification", func(s string) bool { return strings.Contains(s, "Tickets are on sale.") })
	seen := fires.Load()
	// Two more fires; the screen check below says what is wrong if they
	// do not come.
	waitUntil(30*time.Second, func() bool { return fires.Load() >= seen+2 })
	screen := tm.waitFor("the screen", func(string) bool { return true })
	if n := strings.Count(screen, "Tickets are on sale."); n != 1 {
		t.Fatalf("the notification shows %d times:\n%s", n, screen)
	}
	if !strings.Contains(screen, "[schedule]") {
		t.Fatalf("the notification is not labelled schedule:\n%s", screen)
	}
}
