package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func runEnv(model *llmtest.Server, token string, extra ...string) []string {
	return append([]string{"WEB_AUTH_TOKEN=" + token, "LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-fault-test", "LLM_MAX_RETRIES=0"}, extra...)
}

// countRows runs a count on db through the test's one pool on it
// (poolOn): a poll calling it every 50 ms opens no new pools.
func countRows(t *testing.T, db, q string, args ...any) int {
	t.Helper()
	var n int
	if err := poolOn(t, db).QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// testPools holds each test's pool per database URL (poolOn).
var testPools sync.Map // poolKey → *pgxpool.Pool

type poolKey struct {
	t  *testing.T
	db string
}

// poolOn returns t's pool on db, opening it (dbtest.PoolFor) at the first
// call: a new pool per call would hold a connection per call until its
// idle timeout, dozens in a poll.
func poolOn(t *testing.T, db string) *pgxpool.Pool {
	t.Helper()
	k := poolKey{t, db}
	if p, ok := testPools.Load(k); ok {
		return p.(*pgxpool.Pool)
	}
	p := dbtest.PoolFor(t, db)
	testPools.Store(k, p)
	t.Cleanup(func() { testPools.Delete(k) })
	return p
}

// askBeforeTheCrash posts the question the in-process fault tests ask a
// process they then kill, and returns its message id.
func askBeforeTheCrash(t *testing.T, p *serveProc, token, key string) int64 {
	t.Helper()
	posted := newOwnerClient(p.URL, token).post("question before the crash", key)
	if posted.Status != 201 {
		t.Fatalf("post: %d %s %v", posted.Status, posted.Body, posted.Err)
	}
	return posted.Message.ID
}

// answeredOnceFromItsJob starts the next process on db and checks that it
// answers question q once, from the job committed with its run: nothing
// re-enqueued, not by the reaper, one model call, within 20 s.
func answeredOnceFromItsJob(t *testing.T, bin, db string, model *llmtest.Server, token string, q int64) {
	t.Helper()
	b := startProc(t, bin, db, runEnv(model, token)...)
	replies := newOwnerClient(b.URL, token).waitReplies(t, q, 20*time.Second, time.Second)
	if len(replies) != 1 || replies[0].Content != "echo: question before the crash" {
		t.Fatalf("replies after the restart: %+v; want one answer", replies)
	}
	if n := countRows(t, db, `SELECT count(*) FROM river_job WHERE kind = 'agent_turn'`); n != 1 {
		t.Fatalf("agent_turn jobs: %d; want the one committed with the run (nothing re-enqueued)", n)
	}
	if strings.Contains(b.Stdout.String()+b.Stderr.String(), "reaper: queued runs given to a new job") {
		t.Fatal("the reaper enqueued a job")
	}
	if n := model.RequestCount(); n != 1 {
		t.Fatalf("model calls: %d; want 1", n)
	}
}

// TestFaultKill9BeforeJobPickupAnswersOnce: the run row and its job commit
// with the user's message. A process that stores the question but works no
// turns (AGENT_WORKERS=0, as a web-only instance) is killed (-9) before any
// worker picks the job up; the next process answers the question once, from
// that job: the reaper enqueues nothing.
func TestFaultKill9BeforeJobPickupAnswersOnce(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	const token = "fault-pickup-token-0123456789"
	a := startProc(t, bin, db, runEnv(model, token, "AGENT_WORKERS=0")...)
	q := askBeforeTheCrash(t, a, token, "pickup-q1")
	// Committed together: the queued run and its waiting job.
	if n := countRows(t, db, `SELECT count(*) FROM agent_runs r JOIN river_job j ON j.kind = 'agent_turn' AND (j.args->>'run_id')::bigint = r.id
		WHERE r.trigger_message_id = $1 AND r.status = 'queued' AND j.state = 'available'`, q); n != 1 {
		t.Fatalf("queued run with a waiting job for the question: %d; want 1", n)
	}
	a.kill9()
	answeredOnceFromItsJob(t, bin, db, model, token, q)
}

// TestFaultQueuedRunsAnsweredAfterRestart: one run in progress and three
// questions queued behind it on the same timeline; after kill -9, or a
// graceful SIGTERM, and a restart, the three are answered within seconds
// without any other message arriving.
func TestFaultQueuedRunsAnsweredAfterRestart(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"kill9", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			bin := buildBinary(t)
			db := migratedDB(t)
			model := llmtest.NewServer(t)
			model.Enqueue(llmtest.Reply{Text: "never delivered", Delay: time.Minute})
			const token = "fault-queued-token-0123456789"
			a := startProc(t, bin, db, runEnv(model, token)...)
			ca := newOwnerClient(a.URL, token)
			if r := ca.post("the long question", how+"-q0"); r.Status != 201 {
				t.Fatalf("post: %d %s", r.Status, r.Body)
			}
			waitFor(t, "the model call", func() bool { return model.RequestCount() >= 1 })
			var queued []int64
			for i := 1; i <= 3; i++ {
				r := ca.post(fmt.Sprintf("queued question %d", i), fmt.Sprintf("%s-q%d", how, i))
				if r.Status != 201 {
					t.Fatalf("post: %d %s", r.Status, r.Body)
				}
				queued = append(queued, r.Message.ID)
			}
			// Their jobs ran and found the timeline busy.
			waitFor(t, "the queued questions' jobs to end", func() bool {
				return countRows(t, db, `SELECT count(*) FROM river_job WHERE kind = 'agent_turn' AND state = 'completed'`) >= 3
			})
			if how == "kill9" {
				a.kill9()
			} else {
				_ = a.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-a.exited:
				case <-time.After(20 * time.Second):
					t.Fatal("serve did not stop on SIGTERM")
				}
			}
			b := startProc(t, bin, db, runEnv(model, token)...)
			restarted := time.Now()
			cb := newOwnerClient(b.URL, token)
			for i, id := range queued {
				replies := cb.waitReplies(t, id, 10*time.Second, 0)
				want := fmt.Sprintf("echo: queued question %d", i+1)
				if len(replies) != 1 || replies[0].Content != want {
					t.Fatalf("question %d after the restart: %+v; want %q within 10s", i+1, replies, want)
				}
			}
			t.Logf("%s: three queued questions answered %.2fs after the restart", how, time.Since(restarted).Seconds())
		})
	}
}

// TestFaultKill9DuringParallelDelegatesThenNextQuestion: kill -9 while the
// main run waits on two parallel delegate calls. After the restart the run
// is interrupted and each open call has a stored result saying so (written
// with the run's end), and a later question is answered by a model that
// refuses, as OpenAI does, a tool call without its result.
func TestFaultKill9DuringParallelDelegatesThenNextQuestion(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case strings.Contains(string(r.Body), "You are a sub-agent"):
			return llmtest.Reply{Text: "child result", Delay: time.Minute}
		case !r.LastIsToolResult && strings.Contains(r.LastMessage, "research"):
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{
				{ID: "call_a", Name: "delegate", Arguments: `{"task":"look up a"}`},
				{ID: "call_b", Name: "delegate", Arguments: `{"task":"look up b"}`}}}
		}
		return llmtest.Echo(r)
	})
	const token = "fault-delegate-token-0123456789"
	env := runEnv(model, token, "AGENT_CONTEXT_SCOPED_WRITE=1", "AGENT_CONTEXT_SCOPED_READ=1", "AGENT_SUBAGENTS=1")
	a := startProc(t, bin, db, env...)
	first := newOwnerClient(a.URL, token).post("please research two things", "deleg-q1")
	if first.Status != 201 {
		t.Fatalf("post: %d %s", first.Status, first.Body)
	}
	waitFor(t, "both children to call the model", func() bool { return model.RequestCount() >= 3 })
	a.kill9()

	b := startProc(t, bin, db, env...)
	cb := newOwnerClient(b.URL, token)
	if r := cb.waitReplies(t, first.Message.ID, 15*time.Second, 0); len(r) != 1 || !strings.Contains(r[0].Content, "interrupted") {
		t.Fatalf("replies to the interrupted question: %+v", r)
	}
	if n := countRows(t, db, `SELECT count(*) FROM chat_messages WHERE role = 'tool' AND context_scope = 'main'
		AND metadata->>'closed_by' = 'interrupted' AND metadata->>'tool_call_id' IN ('call_a', 'call_b')`); n != 2 {
		t.Fatalf("stored results closing the open delegate calls: %d; want 2", n)
	}
	next := cb.post("what time is it", "deleg-q2")
	if next.Status != 201 {
		t.Fatalf("post: %d %s", next.Status, next.Body)
	}
	replies := cb.waitReplies(t, next.Message.ID, 15*time.Second, 500*time.Millisecond)
	if len(replies) != 1 || replies[0].Content != "echo: what time is it" {
		t.Fatalf("the later question: %+v; want the model's answer", replies)
	}
}

// TestFaultLongAndNULAnswersAreStored: an answer of ~41,000 bytes (over the
// 32 KiB limit on what people send) and one with U+0000 are stored and
// shown on the timeline API (NUL as U+FFFD); the runs end ok.
func TestFaultLongAndNULAnswersAreStored(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	var b strings.Builder
	for i := 0; b.Len() < 41000; i++ {
		fmt.Fprintf(&b, "## Part %d\n\nSome *Markdown* text with `code`.\n\n```go\nfmt.Println(%d)\n```\n\n", i, i)
	}
	long := b.String()
	model.Enqueue(llmtest.Text(long), llmtest.Text("before\x00after"))
	const token = "fault-long-token-0123456789"
	p := startProc(t, bin, db, runEnv(model, token)...)
	c := newOwnerClient(p.URL, token)
	for i, want := range []string{long, "before\uFFFDafter"} {
		r := c.post(fmt.Sprintf("question %d", i), fmt.Sprintf("long-q%d", i))
		if r.Status != 201 {
			t.Fatalf("post: %d %s", r.Status, r.Body)
		}
		replies := c.waitReplies(t, r.Message.ID, 15*time.Second, 0)
		if len(replies) != 1 || replies[0].Content != want || replies[0].Source != "agent" {
			got := ""
			if len(replies) > 0 {
				got = tail(replies[0].Content, 300)
			}
			t.Fatalf("answer %d: %d replies, %q; want the model's answer (%d bytes)", i, len(replies), got, len(want))
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM agent_runs WHERE status = 'ok'`); n != 2 {
		t.Fatalf("runs ended ok: %d; want 2", n)
	}
}

// TestFaultKill9BetweenCommitAndInProcessStartAnswersOnce: the process
// that stores a question starts its run itself right after the commit; the
// run's job waits (scheduled a little later) as the fallback. The test
// holds the timeline's run lock, so the in-process start cannot claim the
// run, and kills the process (-9) right after the commit: the run is
// queued, its job scheduled, nothing claimed, as when a process dies
// between the commit and the start. The next process answers once, from
// that job: nothing is re-enqueued, the model is called once.
func TestFaultKill9BetweenCommitAndInProcessStartAnswersOnce(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := freshDB(t)
	model := llmtest.NewServer(t)
	const token = "fault-inproc-token-0123456789"
	a := startProc(t, bin, db, runEnv(model, token)...)
	conn, err := poolOn(t, db).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_lock(7302, hashtext(current_schema() || '/global'))`); err != nil {
		t.Fatal(err)
	}
	q := askBeforeTheCrash(t, a, token, "inproc-q1")
	a.kill9()
	if n := countRows(t, db, `SELECT count(*) FROM agent_runs r JOIN river_job j ON j.kind = 'agent_turn' AND (j.args->>'run_id')::bigint = r.id
		WHERE r.trigger_message_id = $1 AND r.status = 'queued' AND j.state = 'scheduled'`, q); n != 1 {
		t.Fatalf("queued runs with a scheduled (fallback) job for the question: %d; want 1", n)
	}
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
	answeredOnceFromItsJob(t, bin, db, model, token, q)
}

// TestFaultInProcessRunIsNotRunAgainByItsJob: a question answered by the
// process that stored it leaves its fallback job completed by the run's
// claim; after the fallback's time has passed, there is still one answer
// and one model call.
func TestFaultInProcessRunIsNotRunAgainByItsJob(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := freshDB(t)
	model := llmtest.NewServer(t)
	const token = "fault-inproc2-token-0123456789"
	a := startProc(t, bin, db, runEnv(model, token)...)
	c := newOwnerClient(a.URL, token)
	posted := c.post("answered here", "inproc2-q1")
	if posted.Status != 201 {
		t.Fatalf("post: %d %s %v", posted.Status, posted.Body, posted.Err)
	}
	q := posted.Message.ID
	if r := c.waitReplies(t, q, 15*time.Second, 0); len(r) != 1 {
		t.Fatalf("replies: %+v; want one", r)
	}
	waitFor(t, "the fallback job to be completed", func() bool {
		return countRows(t, db, `SELECT count(*) FROM river_job WHERE kind = 'agent_turn' AND state = 'completed'
			AND scheduled_at < now()`) == 1
	})
	if r := c.waitReplies(t, q, 5*time.Second, time.Second); len(r) != 1 {
		t.Fatalf("replies after the fallback's time: %+v; want one", r)
	}
	if n := model.RequestCount(); n != 1 {
		t.Fatalf("model calls: %d; want 1", n)
	}
}
