package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// buildBinary compiles switchboard once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchboard")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// startServe runs `switchboard serve` on a fresh schema and returns its base URL.
func startServe(t *testing.T, bin string, extraEnv ...string) string {
	t.Helper()
	_, schema := dbtest.EmptySchema(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbtest.SchemaURL(dbtest.URL(t), schema),
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
	base := startServe(t, bin)
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
