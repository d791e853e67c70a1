package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestFaultKill9MidRun kills `switchboard serve` with SIGKILL while the
// model is answering, then starts another process on the same database:
// the question gets exactly one reply, a notice that the answer was
// interrupted; the run ends 'interrupted'; the model is not asked again; a
// client retrying its post (same client_key) stores nothing twice; and the
// next question is answered normally.
func TestFaultKill9MidRun(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Reply{Text: "an answer that never arrives", Delay: time.Minute})
	const token = "fault-kill-token-0123456789"
	env := []string{"WEB_AUTH_TOKEN=" + token, "LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-fault-test"}

	a := startProc(t, bin, db, env...)
	ca := newOwnerClient(a.URL, token)
	first := ca.post("question before the crash", "kill-q1")
	if first.Status != 201 {
		t.Fatalf("post: %d %s %v", first.Status, first.Body, first.Err)
	}
	q1 := first.Message.ID
	waitFor(t, "the model call", func() bool { return model.RequestCount() >= 1 })
	a.kill9()

	b := startProc(t, bin, db, env...)
	cb := newOwnerClient(b.URL, token)
	// The client never saw an answer; it retries its post with the same key.
	if again := cb.post("question before the crash", "kill-q1"); again.Status != 200 || again.Message.ID != q1 {
		t.Fatalf("retried post after the crash: %d %s; want 200 with message %d", again.Status, again.Body, q1)
	}
	replies := cb.waitReplies(t, q1, 20*time.Second, 1500*time.Millisecond)
	if len(replies) != 1 {
		t.Fatalf("question %d has %d replies after the restart: %+v; want exactly one", q1, len(replies), replies)
	}
	if r := replies[0]; r.Source != "system" || !strings.Contains(r.Content, "interrupted") {
		t.Fatalf("reply to the interrupted question: %+v; want a system notice saying it was interrupted", r)
	}
	pool := dbtest.PoolFor(t, db)
	var runs int
	var status string
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*), max(status) FROM agent_runs WHERE trigger_message_id = $1`, q1).Scan(&runs, &status); err != nil {
		t.Fatal(err)
	}
	if runs != 1 || status != "interrupted" {
		t.Fatalf("runs of the question: %d, status %q; want one, interrupted", runs, status)
	}
	if n := model.RequestCount(); n != 1 {
		t.Fatalf("the model was called %d times for the interrupted question; want 1", n)
	}

	// The new process answers the next question once.
	next := cb.post("question after the restart", "kill-q2")
	if next.Status != 201 {
		t.Fatalf("post after restart: %d %s", next.Status, next.Body)
	}
	replies = cb.waitReplies(t, next.Message.ID, 15*time.Second, 500*time.Millisecond)
	if len(replies) != 1 || replies[0].Content != "echo: question after the restart" {
		t.Fatalf("reply after the restart: %+v", replies)
	}
	// No message of the whole timeline is stored twice.
	seen := map[string]int{}
	for _, m := range cb.timeline(t) {
		seen[m.Role+"|"+m.Content]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%q stored %d times", k, n)
		}
	}
}
