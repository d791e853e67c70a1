package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/sandbox"
	"github.com/switchboard/switchboard/services/tools"
)

// env is a registry with the workspace tools and exec over one data
// directory, as the service has them.
type env struct {
	sb   *sandbox.Sandbox
	reg  *tools.Registry
	data string // the service's data directory (workspaces beneath)
	ws   *tools.Workspaces
}

func newEnv(t *testing.T, o sandbox.Options, limits tools.WriteLimits) *env {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap; scripts/test.sh installs it): the sandbox cannot be tested")
	}
	sb := sandbox.New(context.Background(), o)
	t.Cleanup(func() { sb.Close() })
	if !sb.Available() {
		t.Fatalf("bwrap is installed but the sandbox does not work: %s", sb.Reason())
	}
	data := t.TempDir()
	ws := tools.NewWorkspacesWith(filepath.Join(data, "workspaces"), limits)
	t.Cleanup(func() { ws.Close() })
	reg := tools.NewRegistry(nil)
	if err := tools.RegisterWorkspaceTools(reg, ws.For); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(sandbox.Tool(sb, ws.For)); err != nil {
		t.Fatal(err)
	}
	return &env{sb: sb, reg: reg, data: data, ws: ws}
}

func (e *env) call(t *testing.T, name string, args any) tools.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	return e.reg.Execute(context.Background(), name, tools.Call{TimelineScope: "global", ContextScope: "main", RunID: 1, Arguments: raw})
}

func (e *env) exec(t *testing.T, args map[string]any) sandbox.ExecResult {
	t.Helper()
	res := e.call(t, "exec", args)
	if res.IsError {
		t.Fatalf("exec %v: %s", args, res.Content)
	}
	var out sandbox.ExecResult
	if err := json.Unmarshal([]byte(res.Content), &out); err != nil {
		t.Fatalf("exec result %s: %v", res.Content, err)
	}
	return out
}

func (e *env) sh(t *testing.T, command string) sandbox.ExecResult {
	t.Helper()
	return e.exec(t, map[string]any{"command": command})
}

func hasLimit(r sandbox.ExecResult, l string) bool {
	for _, x := range r.Limits {
		if x.Limit == l {
			return true
		}
	}
	return false
}

func TestScriptWritesFileReadFileSees(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, tools.WriteLimits{})
	script := "#!/bin/sh\nprintf 'total %s\\n' \"$(wc -l < data.csv)\" > out/report.txt\necho done \"$@\"\necho warning >&2\n"
	for path, content := range map[string]string{"count.sh": script, "data.csv": "a,1\nb,2\nc,3\n"} {
		if r := e.call(t, "write_file", map[string]any{"path": path, "content": content}); r.IsError {
			t.Fatal(r.Content)
		}
	}
	r := e.exec(t, map[string]any{"command": "mkdir -p out && sh count.sh x"})
	if r.Status != "exited" || r.ExitCode != 0 || r.Stdout != "done x\n" || r.Stderr != "warning\n" {
		t.Fatalf("result: %+v", r)
	}
	want := map[string]string{"out": "created", "out/report.txt": "created"}
	if len(r.Files) != 2 || r.Files[0].Path != "out" || r.Files[1].Path != "out/report.txt" || r.Files[1].Change != want["out/report.txt"] {
		t.Fatalf("files: %+v", r.Files)
	}
	read := e.call(t, "read_file", map[string]any{"path": "out/report.txt"})
	if read.IsError || !strings.Contains(read.Content, `"content":"total 3\n"`) {
		t.Fatalf("read_file after exec: %s", read.Content)
	}

	// A script file runs with its #! interpreter, arguments after it.
	py := "#!/usr/bin/env python3\nimport sys, json\nopen('py.json','w').write(json.dumps(sys.argv[1:]))\nprint('py ok')\n"
	if r := e.call(t, "write_file", map[string]any{"path": "tools/gen.py", "content": py}); r.IsError {
		t.Fatal(r.Content)
	}
	if _, err := exec.LookPath("python3"); err == nil {
		r = e.exec(t, map[string]any{"script": "tools/gen.py", "args": []string{"a b", "c"}})
		if r.ExitCode != 0 || r.Stdout != "py ok\n" {
			t.Fatalf("python script: %+v", r)
		}
		read = e.call(t, "read_file", map[string]any{"path": "py.json"})
		if !strings.Contains(read.Content, `[\"a b\", \"c\"]`) {
			t.Fatalf("read_file py.json: %s", read.Content)
		}
	}
	// Changing and deleting are listed too.
	r = e.sh(t, "echo more >> data.csv; rm count.sh; exit 3")
	if r.ExitCode != 3 || r.Status != "exited" || len(r.Files) != 2 ||
		r.Files[0] != (sandbox.FileChange{Path: "count.sh", Change: "deleted", Type: "file"}) || r.Files[1].Path != "data.csv" || r.Files[1].Change != "changed" {
		t.Fatalf("changed and deleted: %+v", r)
	}
}

func TestBadArguments(t *testing.T) {
	e := newEnv(t, sandbox.Options{Timeout: 5 * time.Second}, tools.WriteLimits{})
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "exactly one"},
		{map[string]any{"command": "true", "script": "x.sh"}, "exactly one"},
		{map[string]any{"command": "true", "timeout_seconds": 6}, "the limit is 5s"},
		{map[string]any{"script": "../etc/passwd"}, "escapes"},
		{map[string]any{"script": "missing.sh"}, "does not exist"},
	} {
		r := e.call(t, "exec", tc.args)
		if !r.IsError || !strings.Contains(r.Content, tc.want) {
			t.Errorf("exec %v: %s, want an error saying %q", tc.args, r.Content, tc.want)
		}
	}
}

func TestNoNetwork(t *testing.T) {
	e := newEnv(t, sandbox.Options{Timeout: 20 * time.Second}, tools.WriteLimits{})
	r := e.sh(t, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
	if strings.TrimSpace(r.Stdout) != "lo" {
		t.Fatalf("network interfaces in the sandbox: %q, want only lo", r.Stdout)
	}
	for _, c := range []string{
		"getent hosts example.com",
		"getent ahosts one.one.one.one",
		// The host's PostgreSQL on 127.0.0.1 is another network namespace's.
		"bash -c 'echo > /dev/tcp/127.0.0.1/5432'",
		"bash -c 'echo > /dev/tcp/1.1.1.1/53'",
		"curl -sS --max-time 5 http://1.1.1.1/",
		"python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), timeout=5)'",
	} {
		r := e.sh(t, c)
		if r.ExitCode == 0 {
			t.Errorf("%s succeeded without network: %+v", c, r)
		}
	}
}

func TestSecretsUnreachable(t *testing.T) {
	secret := fmt.Sprintf("secret-%d", rand.Int64())
	t.Setenv("SWITCHBOARD_TEST_SECRET", secret)
	e := newEnv(t, sandbox.Options{}, tools.WriteLimits{})
	if err := os.WriteFile(filepath.Join(e.data, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another timeline's workspace.
	other, err := e.ws.For("tg:42")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other.Dir(), "theirs.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.sh(t, "env; cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n'")
	if strings.Contains(r.Stdout, secret) || strings.Contains(r.Stdout, "SWITCHBOARD_TEST_SECRET") {
		t.Fatalf("the service's environment leaked: %s", r.Stdout)
	}
	for _, want := range []string{"PATH=/usr/local/bin:", "HOME=/tmp", "LANG=C.UTF-8"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("environment lacks %s: %s", want, r.Stdout)
		}
	}
	for _, c := range []string{
		"cat " + filepath.Join(e.data, "secret.txt"),
		"ls " + e.data,
		"cat " + filepath.Join(other.Dir(), "theirs.txt"),
		"ls /root",
		"cat /root/.bashrc",
		"ls /var/run/postgresql",
		"ls /run/postgresql",
		"cat /etc/shadow",
		"grep -r " + secret + " /etc /tmp /proc/1/environ",
		"touch /usr/x",
		"touch /etc/x",
		"mkdir /new",
	} {
		r := e.sh(t, c)
		if r.ExitCode == 0 || strings.Contains(r.Stdout, secret) {
			t.Errorf("%s succeeded in the sandbox: %+v", c, r)
		}
	}
	// The stub user and group; the host's users are not there.
	r = e.sh(t, "id; cat /etc/passwd; hostname")
	if !strings.Contains(r.Stdout, "uid=1000(sandbox)") || strings.Contains(r.Stdout, "postgres") || !strings.Contains(r.Stdout, "sandbox\n") {
		t.Fatalf("identity in the sandbox: %s", r.Stdout)
	}
}

func TestLimits(t *testing.T) {
	o := sandbox.Options{Timeout: 4 * time.Second, CPUTime: 2 * time.Second, MaxProcs: 32, MaxOutputBytes: 4 << 10,
		MaxFileBytes: 1 << 20, MemoryBytes: 512 << 20, TmpBytes: 2 << 20}
	e := newEnv(t, o, tools.WriteLimits{Workspace: 8 << 20})

	t.Run("fork bomb", func(t *testing.T) {
		r := e.sh(t, "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived")
		t.Logf("fork bomb: %s", r.Summary)
		if !hasLimit(r, "processes") && !strings.Contains(r.Stderr, "fork") && !strings.Contains(r.Stderr, "Resource temporarily unavailable") {
			t.Fatalf("fork bomb did not meet the process limit: %+v", r)
		}
	})
	t.Run("10 GB write", func(t *testing.T) {
		r := e.sh(t, "dd if=/dev/zero of=big bs=1M count=10240")
		if !hasLimit(r, "file_size") || r.ExitCode == 0 {
			t.Fatalf("10 GB write: %+v", r)
		}
		info, err := os.Stat(filepath.Join(e.wsDir(t), "big"))
		if err != nil || info.Size() > 1<<20 {
			t.Fatalf("big: %v %v", info, err)
		}
		// /tmp is bounded too.
		r = e.sh(t, "set -e; for i in 1 2 3; do head -c 900000 /dev/zero > /tmp/x$i; done")
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "No space left") {
			t.Fatalf("/tmp took 5 MB: %+v", r)
		}
		e.sh(t, "rm -f big")
	})
	t.Run("workspace bound", func(t *testing.T) {
		r := e.sh(t, "for i in 1 2 3 4 5 6 7 8 9 10; do head -c 1000000 /dev/zero > w$i; done; head -c 10 /dev/zero > small")
		if !hasLimit(r, "workspace") || !strings.Contains(r.Summary, "WORKSPACE_MAX_BYTES") {
			t.Fatalf("workspace over its bound: %+v", r)
		}
		r = e.sh(t, "du -sb . | cut -f1")
		var used int64
		fmt.Sscan(r.Stdout, &used)
		if used > 8<<20 || used == 0 {
			t.Fatalf("workspace holds %d bytes after the run", used)
		}
		e.sh(t, "rm -f w* small")
	})
	t.Run("memory", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("no python3")
		}
		r := e.sh(t, "python3 -c 'x = bytearray(700 << 20); print(len(x))'")
		if r.ExitCode == 0 || !hasLimit(r, "memory") || strings.Contains(r.Stdout, "734003200") {
			t.Fatalf("700 MB allocation with a 512 MiB limit: %+v", r)
		}
	})
	t.Run("yes", func(t *testing.T) {
		r := e.sh(t, "yes")
		if r.Status != "killed" || !hasLimit(r, "output") || !r.StdoutTruncated || r.StdoutBytes <= 16*4<<10 {
			t.Fatalf("yes: %+v", r)
		}
		if len(r.Stdout) > 4<<10+8<<10+200 || !strings.Contains(r.OutputCap, "4 KiB") {
			t.Fatalf("yes kept %d bytes; cap %q", len(r.Stdout), r.OutputCap)
		}
	})
	t.Run("sleep 1000", func(t *testing.T) {
		arg := fmt.Sprintf("1000.%d", rand.IntN(1e9))
		start := time.Now()
		r := e.sh(t, "sleep "+arg+" & sleep "+arg)
		if r.Status != "killed" || !hasLimit(r, "timeout") || time.Since(start) > time.Minute {
			t.Fatalf("sleep: %+v", r)
		}
		waitGone(t, arg)
	})
	// The service is unharmed: the next run works.
	if r := e.sh(t, "echo fine"); r.Stdout != "fine\n" {
		t.Fatalf("after the limits: %+v", r)
	}
}

// TestCPULimit: a busy loop is stopped by its CPU time, well before its
// wall time (which is long, for a busy machine).
func TestCPULimit(t *testing.T) {
	e := newEnv(t, sandbox.Options{Timeout: 3 * time.Minute, CPUTime: time.Second}, tools.WriteLimits{})
	r := e.sh(t, "while :; do :; done")
	if !hasLimit(r, "cpu") || r.ExitCode != 128+int(syscall.SIGXCPU) || hasLimit(r, "timeout") {
		t.Fatalf("busy loop: %+v", r)
	}
}

func (e *env) wsDir(t *testing.T) string {
	w, err := e.ws.For("global")
	if err != nil {
		t.Fatal(err)
	}
	return w.Dir()
}

// sleepers lists the pids of processes "sleep <arg>".
func sleepers(arg string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		var pid int
		if _, err := fmt.Sscan(d.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Equal(b, []byte("sleep\x00"+arg+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

func waitGone(t *testing.T, arg string) {
	t.Helper()
	if !poll(15*time.Second, func() bool { return len(sleepers(arg)) == 0 }) {
		t.Fatalf("processes sleep %s still run: %v", arg, sleepers(arg))
	}
}

func TestConcurrencyBound(t *testing.T) {
	e := newEnv(t, sandbox.Options{Concurrency: 1, Timeout: 30 * time.Second}, tools.WriteLimits{})
	if err := os.WriteFile(filepath.Join(e.wsDir(t), "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var first sandbox.ExecResult
	wg.Go(func() { first = e.sh(t, "while [ -e go ]; do sleep 0.05; done; echo first") })
	// Wait until the first run holds the only slot (it is running).
	if !poll(20*time.Second, func() bool { return len(sleepers("0.05")) > 0 }) {
		t.Fatal("the first run never started its loop")
	}
	r := e.call(t, "exec", map[string]any{"command": "echo second", "timeout_seconds": 1})
	if !r.IsError || r.ErrorCode != sandbox.CodeBusy || !strings.Contains(r.Content, "EXEC_CONCURRENCY") {
		t.Errorf("second call while the only sandbox is busy: %s", r.Content)
	}
	os.Remove(filepath.Join(e.wsDir(t), "go"))
	wg.Wait()
	if first.Stdout != "first\n" {
		t.Fatalf("first: %+v", first)
	}
}

// TestHistoryForm: history keeps the summary and the last 20 lines of
// stderr; stdout only in the summary.
func TestHistoryForm(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, tools.WriteLimits{})
	res := e.call(t, "exec", map[string]any{"command": "seq 1 500; for i in $(seq 1 30); do echo err$i >&2; done; echo last-out"})
	tool, _ := e.reg.Get("exec")
	h := prompt.Compress("exec", res.Content, prompt.CompressionRule{MaxChars: tool.History.MaxChars, KeepFields: tool.History.KeepFields})
	var kept map[string]any
	if err := json.Unmarshal([]byte(h), &kept); err != nil {
		t.Fatalf("history form %s: %v", h, err)
	}
	if _, ok := kept["stdout"]; ok {
		t.Fatalf("history keeps stdout: %s", h)
	}
	tail, _ := kept["stderr_tail"].(string)
	if !strings.HasPrefix(tail, "err11\n") || !strings.HasSuffix(tail, "err30") || strings.Count(tail, "\n") != 19 {
		t.Fatalf("stderr tail in history: %q", tail)
	}
	sum, _ := kept["summary"].(string)
	if !strings.Contains(sum, "exit 0") || !strings.Contains(sum, "stdout 501 lines") || !strings.Contains(sum, `last line "last-out"`) {
		t.Fatalf("summary: %q", sum)
	}
}

func TestUnavailable(t *testing.T) {
	sb := sandbox.New(context.Background(), sandbox.Options{Bwrap: "/nonexistent/bwrap"})
	defer sb.Close()
	if sb.Available() || !strings.Contains(sb.Reason(), "bubblewrap") {
		t.Fatalf("missing bwrap: available %v, reason %q", sb.Available(), sb.Reason())
	}
	ws := tools.NewWorkspaces(t.TempDir())
	defer ws.Close()
	reg := tools.NewRegistry(nil)
	if err := reg.Register(sandbox.Tool(sb, ws.For)); err != nil {
		t.Fatal(err)
	}
	r := reg.Execute(context.Background(), "exec", tools.Call{TimelineScope: "global", Arguments: json.RawMessage(`{"command":"true"}`)})
	if !r.IsError || !strings.Contains(r.Content, "does not work") {
		t.Fatalf("exec without a sandbox: %s", r.Content)
	}
	sb2 := sandbox.New(context.Background(), sandbox.Options{Network: true})
	defer sb2.Close()
	if sb2.Available() || !strings.Contains(sb2.Reason(), "EXEC_NETWORK") {
		t.Fatalf("network: %q", sb2.Reason())
	}
	_ = services.EffectExec
}

// TestKillNineLeavesNothing runs a sandbox in a child process (this test
// binary), SIGKILLs the child mid-run, and checks that the sandbox's
// processes died with it.
func TestKillNineLeavesNothing(t *testing.T) {
	if arg := os.Getenv("SANDBOX_CHILD_SLEEP"); arg != "" {
		e := newEnv(t, sandbox.Options{Timeout: 10 * time.Minute}, tools.WriteLimits{})
		e.sh(t, "sleep "+arg+" & sleep "+arg)
		t.Fatal("the child's sandbox returned")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap; scripts/test.sh installs it): the sandbox cannot be tested")
	}
	arg := fmt.Sprintf("1000.%d", rand.IntN(1e9))
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineLeavesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SANDBOX_CHILD_SLEEP="+arg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	childEnded := false
	if !poll(60*time.Second, func() bool {
		select {
		case <-exited:
			childEnded = true
			return true
		default:
		}
		return len(sleepers(arg)) >= 2
	}) {
		cmd.Process.Kill()
		<-exited
		t.Fatalf("the child's sandbox did not start: %s", out.String())
	}
	if childEnded {
		t.Fatalf("the child ended before its sandbox ran: %s", out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	waitGone(t, arg)
}
