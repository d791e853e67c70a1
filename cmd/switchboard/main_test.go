package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
)

var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

// TestMain runs this package's tests one at a time unless
// TEST_PARALLEL_PROCESSES=1: most of them run whole service processes, each
// with its own pool and workers, and two such tests beside another
// package's would take the suite past the ~30 PostgreSQL connections it
// keeps to (scripts/test.sh).
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("TEST_PARALLEL_PROCESSES") != "1" {
		_ = flag.Set("test.parallel", "1")
	}
	binDir, _ = os.MkdirTemp("", "switchboard-bin-")
	code := dbtest.Run(m)
	os.RemoveAll(binDir)
	os.Exit(code)
}

// buildBinary compiles switchboard once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "switchboard")
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// freshDB returns the URL of a new, empty schema.
func freshDB(t *testing.T) string {
	_, schema := dbtest.EmptySchema(t)
	return apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema))
}

// startServe runs `switchboard serve` on dbURL and returns its base URL.
func startServe(t *testing.T, bin, dbURL string, extraEnv ...string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"HTTP_ADDR=127.0.0.1:0", "DATA_DIR="+t.TempDir(), "LOG_FORMAT=text")
	cmd.Env = append(cmd.Env, extraEnv...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before listening")
			}
			if m := listenRE.FindStringSubmatch(l); m != nil {
				go func() {
					for range lines {
					}
				}()
				return m[1]
			}
		case <-deadline:
			t.Fatal("serve did not start within 30s")
		}
	}
}

func TestServeStartsMigratesAndAnswersHealth(t *testing.T) {
	bin := buildBinary(t)
	base := startServe(t, bin, freshDB(t))
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	var out, errOut strings.Builder
	if err := run(ctx, []string{"frobnicate"}, env(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown verb: %v", err)
	}
	if !strings.Contains(errOut.String(), "Usage:") {
		t.Fatal("usage not printed for an unknown verb")
	}
	err := run(ctx, []string{"serve"}, env(map[string]string{"AGENT_CONTEXT_SCOPED_READ": "1"}), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "AGENT_CONTEXT_SCOPED_WRITE=1") {
		t.Fatalf("0/1 flags must be refused at start: %v", err)
	}
	if err := run(ctx, []string{"migrate", "sideways"}, env(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), "up, down, status") {
		t.Fatalf("bad migrate verb: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"--help"}, env(nil), &out, &errOut); err != nil || !strings.Contains(out.String(), "AGENT_CONTEXT_SCOPED_WRITE") {
		t.Fatalf("help: %v", err)
	}
}

// TestTwoProcessesShareOneTimeline starts two real serve processes on one
// database: a message posted to one arrives on a websocket of the other.
func TestTwoProcessesShareOneTimeline(t *testing.T) {
	bin := buildBinary(t)
	db := freshDB(t)
	token := "two-process-token-0123456789"
	a := startServe(t, bin, db, "WEB_AUTH_TOKEN="+token)
	b := startServe(t, bin, db, "WEB_AUTH_TOKEN="+token)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b, "http")+"/api/ws?after=0",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	readFrame := func() map[string]any {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		_ = json.Unmarshal(data, &f)
		return f
	}
	if f := readFrame(); f["type"] != "ready" {
		t.Fatalf("first frame %v", f)
	}
	req, _ := http.NewRequest("POST", a+"/api/messages", strings.NewReader(`{"content":"across processes"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("post to A: %v %v", resp, err)
	}
	resp.Body.Close()
	f := readFrame()
	msg, _ := f["message"].(map[string]any)
	if f["type"] != "message" || msg["content"] != "across processes" {
		t.Fatalf("B got %v", f)
	}
}
