package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestExecKill9MidExecNotRerun kills `switchboard serve` with SIGKILL while
// an exec call runs in its sandbox: no sandbox process outlives it; the
// next process closes the run as interrupted, records the call as cut off
// with its effect unknown, and never runs the command again.
func TestExecKill9MidExecNotRerun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap; scripts/test.sh installs it): exec cannot be tested")
	}
	bin := buildBinary(t)
	db := migratedDB(t)
	dataDir := t.TempDir()
	model := llmtest.NewServer(t)
	arg := fmt.Sprintf("1000.%d", rand.IntN(1e9))
	model.Enqueue(llmtest.Call("exec", `{"command":"echo ran >> runs.log; sleep `+arg+`"}`))
	const token = "exec-kill-token-0123456789"
	env := []string{"WEB_AUTH_TOKEN=" + token, "LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-exec-test", "DATA_DIR=" + dataDir, "EXEC_ENABLED=1",
		"TOOLS_DEFER_OVER=0"} // exec offered at once: the scripted model calls it without find_tools

	a := startProc(t, bin, db, env...)
	ca := newOwnerClient(a.URL, token)
	first := ca.post("run the long job", "exec-q1")
	if first.Status != 201 {
		t.Fatalf("post: %d %s %v", first.Status, first.Body, first.Err)
	}
	q1 := first.Message.ID
	waitFor(t, "the sandboxed sleep", func() bool { return len(processesOf("sleep", arg)) > 0 })
	a.kill9()
	if !waitUntil(15*time.Second, func() bool { return len(processesOf("sleep", arg)) == 0 }) {
		t.Fatalf("sandbox processes outlived the killed service: %v", processesOf("sleep", arg))
	}

	b := startProc(t, bin, db, env...)
	cb := newOwnerClient(b.URL, token)
	replies := cb.waitReplies(t, q1, 30*time.Second, 1500*time.Millisecond)
	if len(replies) != 1 || !strings.Contains(replies[0].Content, "interrupted") {
		t.Fatalf("replies to the interrupted question: %+v", replies)
	}
	var closed string
	pool := dbtest.PoolFor(t, db)
	if err := pool.QueryRow(context.Background(),
		`SELECT content FROM chat_messages WHERE role = 'tool' AND metadata->>'tool_name' = 'exec' ORDER BY id DESC LIMIT 1`).Scan(&closed); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(closed, "effect is unknown") {
		t.Fatalf("the cut-off exec call's stored result: %s", closed)
	}
	// Give a wrongly re-run command time to show, then count its runs.
	time.Sleep(2 * time.Second) // why kept: asserts a command is NOT run again by the restarted service; nothing signals "decided not to re-run", and real processes cannot be a synctest bubble
	log, err := os.ReadFile(filepath.Join(dataDir, "workspaces", "global", "runs.log"))
	if err != nil || !bytes.Equal(log, []byte("ran\n")) || len(processesOf("sleep", arg)) > 0 {
		t.Fatalf("runs.log %q (%v), sleepers %v: want the command run exactly once", log, err, processesOf("sleep", arg))
	}
	if n := model.RequestCount(); n != 1 {
		t.Fatalf("the model was called %d times for the interrupted question; want 1", n)
	}
}

// processesOf lists the pids whose command line is exactly argv.
func processesOf(argv ...string) []int {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		var pid int
		if _, err := fmt.Sscan(d.Name(), &pid); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil && bytes.Equal(b, want) {
			out = append(out, pid)
		}
	}
	return out
}
