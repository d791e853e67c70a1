// Package tgtest runs the npm Bot API emulator telegram-test-api for tests
// (installed by scripts/test.sh into scripts/testdeps) and adapts the bot
// library's requests to it. Without node or the package the tests are
// skipped, except under CI=true, where that is a failure.
package tgtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Emulator is a running telegram-test-api on 127.0.0.1.
type Emulator struct {
	// URL is the Bot API base URL (TELEGRAM_API_URL).
	URL string
}

// Start launches the emulator for the test and stops it at cleanup.
func Start(t testing.TB) *Emulator {
	t.Helper()
	dir := testdepsDir()
	node, err := exec.LookPath("node")
	if err != nil || dir == "" {
		missing(t, "node or scripts/testdeps/node_modules/telegram-test-api")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, filepath.Join(dir, "telegram-emulator.js"), fmt.Sprint(port))
	cmd.Dir = dir
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && strings.HasPrefix(sc.Text(), "listening") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("emulator exited: %s", stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("emulator did not start: %s", stderr.String())
	}
	return &Emulator{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s missing (scripts/test.sh installs it)", what)
	}
	t.Skipf("%s missing; run scripts/test.sh (or npm ci in scripts/testdeps)", what)
}

// testdepsDir finds scripts/testdeps with the emulator installed, walking up
// from the working directory to the module root.
func testdepsDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			td := filepath.Join(dir, "scripts", "testdeps")
			if _, err := os.Stat(filepath.Join(td, "node_modules", "telegram-test-api")); err == nil {
				return td
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// User is a Telegram user of the emulator, talking in a private chat (or
// in the group ChatID when set).
type User struct {
	ID        int64
	FirstName string
	Username  string
	// ChatID defaults to ID (a private chat).
	ChatID   int64
	ChatType string
}

// Send posts text from u to the bot with token, as the user would.
func (e *Emulator) Send(t testing.TB, token string, u User, text string) {
	t.Helper()
	chatID, chatType := u.ChatID, u.ChatType
	if chatID == 0 {
		chatID = u.ID
	}
	if chatType == "" {
		chatType = "private"
	}
	msg := map[string]any{
		"botToken": token,
		"date":     time.Now().Unix(),
		"text":     text,
		"from":     map[string]any{"id": u.ID, "first_name": u.FirstName, "username": u.Username, "is_bot": false},
		"chat":     map[string]any{"id": chatID, "first_name": u.FirstName, "username": u.Username, "type": chatType},
	}
	e.post(t, "/sendMessage", msg, nil)
}

// BotMessage is a message the bot sent, as the emulator stored it.
type BotMessage struct {
	MessageID int64 `json:"messageId"`
	UpdateID  int64 `json:"updateId"`
	Message   struct {
		ChatID          json.RawMessage `json:"chat_id"`
		Text            string          `json:"text"`
		ParseMode       string          `json:"parse_mode"`
		ReplyParameters json.RawMessage `json:"reply_parameters"`
	} `json:"message"`
}

// BotMessages returns (once each) the messages the bot sent to chatID.
func (e *Emulator) BotMessages(t testing.TB, token string, chatID int64) []BotMessage {
	t.Helper()
	var out struct {
		Result []BotMessage `json:"result"`
	}
	e.post(t, "/getUpdates", map[string]any{"token": token, "chatId": chatID}, &out)
	return out.Result
}

// WaitBotMessages collects the bot's messages to chatID until n arrived or
// timeout passed.
func (e *Emulator) WaitBotMessages(t testing.TB, token string, chatID int64, n int, timeout time.Duration) []BotMessage {
	t.Helper()
	var got []BotMessage
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got = append(got, e.BotMessages(t, token, chatID)...)
		if len(got) >= n {
			return got
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return got
		}
	}
}

func (e *Emulator) post(t testing.TB, path string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(e.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("emulator %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("emulator %s: %d %s", path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("emulator %s: %v: %s", path, err, raw)
		}
	}
}

// Transport re-encodes the bot library's multipart/form-data requests as
// JSON (the emulator parses only JSON and urlencoded bodies) and counts the
// calls per Bot API method.
type Transport struct {
	Base http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

// Client returns an *http.Client using a new Transport.
func Client() (*http.Client, *Transport) {
	tr := &Transport{}
	return &http.Client{Transport: tr}, tr
}

// Calls returns how many times method was called.
func (tr *Transport) Calls(method string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.n[method]
}

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	tr.mu.Lock()
	if tr.n == nil {
		tr.n = map[string]int{}
	}
	tr.n[method]++
	tr.mu.Unlock()
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	mt, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || req.Body == nil {
		return base.RoundTrip(req)
	}
	fields := map[string]any{}
	mr := multipart.NewReader(req.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		v, _ := io.ReadAll(p)
		s := strings.TrimSpace(string(v))
		if (strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")) && json.Valid(v) {
			fields[p.FormName()] = json.RawMessage(v)
		} else {
			fields[p.FormName()] = string(v)
		}
	}
	req.Body.Close()
	body, _ := json.Marshal(fields)
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Type", "application/json")
	return base.RoundTrip(out)
}
