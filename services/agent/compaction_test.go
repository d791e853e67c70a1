package agent_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// compactJobs counts the compaction jobs ever inserted.
func compactJobs(t *testing.T, b *bundle) int {
	t.Helper()
	var n int
	if err := b.db.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'compact'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUntil polls cond (a state, never a duration being asserted).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(waitLong, cond) {
		t.Fatalf("gave up waiting for %s", what)
	}
}

// TestCompactionRunsBesideTheNextMessage: a run whose prompt neared the
// window enqueues a compaction job with its end; the job's summary call
// is held, and meanwhile the next message is answered (the timeline's
// lock is not held by the compaction), and no second compaction of the
// scope starts; once the summary comes back the cursor moves, once.
func TestCompactionRunsBesideTheNextMessage(t *testing.T) {
	t.Parallel()
	// 6,000: the system prompt and the tools' definitions take most of
	// 4,000, so the questions themselves would not fit.
	b := setup(t, setupOpts{window: 6000, keepTurns: 1})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	var summaryCalls atomic.Int64
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			summaryCalls.Add(1)
			<-release
			return llmtest.Text(validSummary)
		}
		u := llmtest.Usage{PromptTokens: 100, CompletionTokens: 5}
		if strings.HasPrefix(r.LastMessage, "big") {
			u.PromptTokens = 5000 // over 0.8 × 6000
		}
		return llmtest.Reply{Text: "ok " + r.LastMessage, Usage: u}
	})
	for i, q := range []string{"one", "two", "three"} {
		b.say(t, q)
		b.waitVisible(t, 2*(i+1))
	}
	if n := compactJobs(t, b); n != 0 {
		t.Fatalf("%d compaction jobs for small prompts", n)
	}
	b.say(t, "big question")
	b.waitVisible(t, 8)
	if n := compactJobs(t, b); n != 1 {
		t.Fatalf("%d compaction jobs after a prompt near the window, want 1 (committed with the answer)", n)
	}
	waitUntil(t, "the summary call", func() bool { return summaryCalls.Load() == 1 })
	// The summary call is held: the next message is answered meanwhile,
	// and though its prompt nears the window too, no second compaction of
	// the scope starts while the first runs.
	b.say(t, "big again")
	msgs := b.waitVisible(t, 10)
	if got := msgs[len(msgs)-1].Content; got != "ok big again" {
		t.Fatalf("answer while compacting: %q", got)
	}
	if n := compactJobs(t, b); n != 1 || summaryCalls.Load() != 1 {
		t.Fatalf("%d compaction jobs, %d summary calls while one runs; want 1 and 1", n, summaryCalls.Load())
	}
	if sum, err := b.store.GetSummary(context.Background(), "global", "global"); err == nil && sum.UntilMessageID != 0 {
		t.Fatal("the cursor moved before the summary came back")
	}
	free()
	waitUntil(t, "the summary cursor", func() bool {
		sum, err := b.store.GetSummary(context.Background(), "global", "global")
		return err == nil && sum.UntilMessageID != 0
	})
	segs, err := b.store.ListSegments(context.Background(), "global", "global")
	if err != nil || len(segs) != 1 || summaryCalls.Load() != 1 {
		t.Fatalf("%d segments, %d summary calls (%v), want 1 and 1", len(segs), summaryCalls.Load(), err)
	}
	// No notice: it worked.
	for _, m := range msgs {
		if strings.Contains(m.Content, "could not archive") {
			t.Fatalf("failure notice: %q", m.Content)
		}
	}
}

// TestCompactionTriggerCountsTheNextInput: a last prompt just under the
// trigger compacts only when the message queued behind the run brings it
// over (docs/CONTEXT.md: "plus the next input").
func TestCompactionTriggerCountsTheNextInput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{window: 6000, keepTurns: 1})
	hold := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(hold) }) })
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			return llmtest.Text(validSummary)
		}
		u := llmtest.Usage{PromptTokens: 100, CompletionTokens: 5}
		switch {
		case strings.HasPrefix(r.LastMessage, "near"):
			u.PromptTokens = 4500 // under 0.8 × 6000 = 4800
		case strings.HasPrefix(r.LastMessage, "wait"):
			<-hold
			u.PromptTokens = 4500
		}
		return llmtest.Reply{Text: "ok", Usage: u}
	})
	b.say(t, "near the window, nothing queued behind")
	b.waitVisible(t, 2)
	if n := compactJobs(t, b); n != 0 {
		t.Fatalf("compacted without a next input: %d jobs", n)
	}
	// The same size with a long message queued behind it.
	first := b.say(t, "wait for the next one")
	waitUntil(t, "the run to start", func() bool { return b.runOf(t, first.ID).Status == services.RunRunning })
	b.say(t, "long "+strings.Repeat("word ", 1200))
	once.Do(func() { close(hold) })
	b.waitVisible(t, 6)
	if n := compactJobs(t, b); n < 1 {
		t.Fatal("the next input was not counted: no compaction job")
	}
}
