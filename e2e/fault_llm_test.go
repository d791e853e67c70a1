package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestFaultModelProviderErrors scripts the model's failures through a real
// `switchboard serve` (LLM_MAX_RETRIES=2, LLM_TIMEOUT=2s): transient errors
// are retried a bounded number of times; when the retries run out, or the
// failure is not worth retrying, the question gets exactly one visible
// notice; a stream that broke off is never stored as an answer.
func TestFaultModelProviderErrors(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	const token = "fault-llm-token-0123456789"
	p := startProc(t, bin, db, "WEB_AUTH_TOKEN="+token, "LLM_PROVIDER=openai", "LLM_BASE_URL="+model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-fault-test", "LLM_MAX_RETRIES=2", "LLM_TIMEOUT=2s")
	c := newOwnerClient(p.URL, token)

	const partial = "partial-answer-words"
	cases := []struct {
		name    string
		replies []llmtest.Reply
		// calls is how many model requests the question may make.
		calls int
		// answer is the reply's text (a successful answer), or notice is a
		// fragment of the notice and status the run's end; lacks is what
		// the notice must not say.
		answer, notice, lacks, status string
	}{
		{name: "429 twice then an answer", replies: []llmtest.Reply{llmtest.Status(429, "0"), llmtest.Status(429, "0"), llmtest.Text("recovered after 429s")},
			calls: 3, answer: "recovered after 429s", status: "ok"},
		{name: "500 until retries run out", replies: []llmtest.Reply{llmtest.Status(500, ""), llmtest.Status(500, ""), llmtest.Status(500, "")},
			calls: 3, notice: "I could not answer", status: "error"},
		{name: "429 asking to wait an hour", replies: []llmtest.Reply{llmtest.Status(429, "3600")},
			calls: 1, notice: "I could not answer", status: "error"},
		// Every attempt timing out (LLM_TIMEOUT) is the model not answering
		// in time, status 'error', not "I ran out of time (the limit is
		// 10m0s)" with status 'timeout', which blames the run's own limit.
		{name: "timeouts", replies: []llmtest.Reply{{Text: "slow", Delay: 5 * time.Second}, {Text: "slow", Delay: 5 * time.Second}, {Text: "slow", Delay: 5 * time.Second}},
			calls: 3, notice: "I could not answer: The model server timed out", lacks: "ran out of time", status: "error"},
		{name: "stream cut halfway", replies: []llmtest.Reply{{Text: partial + " one two three four five six seven", CutAfter: 4}},
			calls: 1, notice: "broke off", status: "error"},
		{name: "malformed tool-call JSON, then corrected", replies: []llmtest.Reply{llmtest.Call("read_file", `{"path": "notes.md`), llmtest.Text("corrected after a bad call")},
			calls: 2, answer: "corrected after a bad call", status: "ok"},
		{name: "400 is not retried", replies: []llmtest.Reply{llmtest.Status(400, "")},
			calls: 1, notice: "I could not answer", status: "error"},
	}
	pool := dbtest.PoolFor(t, db)
	for i, tc := range cases {
		before := model.RequestCount()
		model.Enqueue(tc.replies...)
		started := time.Now()
		res := c.post(fmt.Sprintf("question %d: %s", i, tc.name), fmt.Sprintf("llm-%d", i))
		if res.Status != 201 {
			t.Fatalf("%s: post: %d %s", tc.name, res.Status, res.Body)
		}
		replies := c.waitReplies(t, res.Message.ID, 20*time.Second, 300*time.Millisecond)
		took := time.Since(started)
		calls := model.RequestCount() - before
		if len(replies) != 1 {
			t.Errorf("%s: %d replies %+v; want exactly one", tc.name, len(replies), replies)
			continue
		}
		r := replies[0]
		var status string
		_ = pool.QueryRow(context.Background(), `SELECT status FROM agent_runs WHERE trigger_message_id = $1`, res.Message.ID).Scan(&status)
		t.Logf("%s: %d model calls, %s, run %s, reply from %s: %.160q", tc.name, calls, took.Round(100*time.Millisecond), status, r.Source, r.Content)
		if calls != tc.calls {
			t.Errorf("%s: %d model calls; want %d", tc.name, calls, tc.calls)
		}
		if status != tc.status {
			t.Errorf("%s: run ended %q; want %q", tc.name, status, tc.status)
		}
		if tc.answer != "" && (r.Content != tc.answer || r.Source != "agent") {
			t.Errorf("%s: reply %+v; want the answer %q", tc.name, r, tc.answer)
		}
		if tc.notice != "" && (r.Source != "system" || !strings.Contains(r.Content, tc.notice)) {
			t.Errorf("%s: reply %+v; want a notice containing %q", tc.name, r, tc.notice)
		}
		if tc.lacks != "" && strings.Contains(r.Content, tc.lacks) {
			t.Errorf("%s: reply %+v; the notice must not say %q", tc.name, r, tc.lacks)
		}
		if n := model.Pending(); n != 0 {
			t.Fatalf("%s: %d scripted replies unused (later cases would take them)", tc.name, n)
		}
	}
	// No row, visible or not, holds the broken-off text as an answer.
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM chat_messages WHERE role = 'assistant' AND content LIKE '%' || $1 || '%'`, partial).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d assistant rows hold the text of the stream that broke off", n)
	}
}
