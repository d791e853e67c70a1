// Package servetest runs the real switchboard binary for tests: it builds
// cmd/switchboard once per test binary, gives each test a fresh database
// schema, and starts `switchboard serve` processes a test can stop or kill.
// cmd/switchboard's tests and the end-to-end tests in e2e share it.
package servetest

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/internal/polltest"
	"github.com/switchboard/switchboard/repository/dbtest"
)

var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

// ProcessConns is what one test running service processes counts for in
// the suite's connection budget (dbtest.SetTestConns): its processes'
// pools, which open connections as they are used and close idle ones
// after 2 s (FrugalURL), and the test's own pool. Measured per test with
// the budget's count of what each test holds (dbtest, application_name):
// at most 11 in e2e (up to three processes at once) and in
// cmd/switchboard. A test holding more by design reserves its own
// (dbtest.Reserve); one found holding more has its holding raised while
// it runs.
const ProcessConns = 12

// Main is TestMain for a package whose tests run whole service processes.
// It runs them one at a time unless TEST_PARALLEL_PROCESSES=1: each process
// has its own pool and workers, and two such tests beside another package's
// would take the suite past the ~30 PostgreSQL connections it keeps to
// (scripts/test.sh). Each counts as ProcessConns.
func Main(m *testing.M) {
	flag.Parse()
	if os.Getenv("TEST_PARALLEL_PROCESSES") != "1" {
		_ = flag.Set("test.parallel", "1")
	}
	dbtest.SetTestConns(ProcessConns)
	binDir, _ = os.MkdirTemp("", "switchboard-bin-")
	code := dbtest.Run(m)
	os.RemoveAll(binDir)
	os.Exit(code)
}

// Binary compiles cmd/switchboard once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	if binDir == "" {
		t.Fatal("servetest: call servetest.Main from TestMain")
	}
	bin := filepath.Join(binDir, "switchboard")
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, "github.com/switchboard/switchboard/cmd/switchboard").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// ListenRE matches serve's "listening on URL" line.
var ListenRE = regexp.MustCompile(`listening on (http://\S+)`)

// What serve prints when it generates the owner token at first start, and
// what `switchboard token reset` prints: the token (and the login link).
var (
	GeneratedTokenRE = regexp.MustCompile(`Owner login token generated[^\n]*\n\s+(\S+)`)
	NewTokenRE       = regexp.MustCompile(`New owner token[^\n]*\n\s+(\S+)\nLog in at:\n\s+(\S+)`)
)

// FreshDB returns the URL of a new, empty schema with a frugal pool.
func FreshDB(t testing.TB) string {
	_, schema := dbtest.EmptySchema(t)
	return apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema))
}

// MigratedDB returns the URL of a migrated, empty schema with a frugal
// pool (one the package's earlier tests gave back, emptied, when there is
// one): a process started on it has no migrations to run. Tests of what
// serve does on a new database take FreshDB.
func MigratedDB(t testing.TB) string {
	return apptest.FrugalURL(apptest.SchemaURL(t))
}

// Start runs `switchboard serve` on dbURL on a free port and returns its
// base URL. Cleanup interrupts it and waits for it to exit.
func Start(t testing.TB, bin, dbURL string, extraEnv ...string) string {
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
			if m := ListenRE.FindStringSubmatch(l); m != nil {
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

// FreePort returns a port nothing listens on (listen on :0, close).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartAt is Start on a fixed address, returning the process so a test can
// kill it. Cleanup kills it if the test has not.
func StartAt(t testing.TB, bin, dbURL, addr string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "HTTP_ADDR="+addr, "DATA_DIR="+t.TempDir(), "LOG_FORMAT=text")
	cmd.Env = append(cmd.Env, extraEnv...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if ListenRE.MatchString(sc.Text()) {
				close(listening)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-listening:
	case <-done:
		t.Fatal("serve exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start within 30s")
	}
	return cmd
}

// WaitFor polls cond for up to 30 s and fails the test naming what it
// waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !polltest.Every(30*time.Second, 50*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// WaitLong is WaitFor with room for River's scheduler, which makes a
// scheduled job available up to 5 s after its time.
func WaitLong(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !polltest.Every(60*time.Second, 100*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Approval is an approval as the owner's API lists it.
type Approval struct {
	ID    int64
	State string
}

// Approvals lists the owner's approvals (those in state when it is not
// empty); ok is false when the server could not be asked.
func Approvals(base, token, state string) (list []Approval, ok bool) {
	url := base + "/api/approvals"
	if state != "" {
		url += "?state=" + state
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer res.Body.Close()
	var body struct{ Approvals []Approval }
	if json.NewDecoder(res.Body).Decode(&body) != nil {
		return nil, false
	}
	return body.Approvals, true
}

// PendingApprovalID waits until the owner's API lists exactly one pending
// approval and returns its id.
func PendingApprovalID(t testing.TB, base, token string) int64 {
	t.Helper()
	var id int64
	WaitFor(t, "a pending approval", func() bool {
		list, ok := Approvals(base, token, "pending")
		if !ok || len(list) != 1 {
			return false
		}
		id = list[0].ID
		return true
	})
	return id
}

// Pause waits d or until ctx ends, whichever comes first. It is the pace
// of a load generator or the backoff of a reconnecting client, never a
// wait for something to happen: those poll a condition.
func Pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
