package prompt_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
)

// TestWorkingSetBoundsHistory: with a large window, history keeps the
// last KeepTurns turns and the current one plus CONTEXT_HISTORY_TOKENS of
// older turns, not the whole window; the build says the working set is
// full, so compaction is triggered without any provider-reported usage.
// Without a working set the same build sends every turn.
func TestWorkingSetBoundsHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	last := seedTurns(t, s, "global", 400, "a message of about a dozen words that the owner and the agent exchanged")
	build := func(historyTokens int) (prompt.Prompt, *prompt.Manager) {
		m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Summariser: &recordingProvider{reply: "x"}}, prompt.Config{Window: 128000, HistoryTokens: historyTokens, Compaction: prompt.CompactionConfig{KeepTurns: 5}})
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: last})
		if err != nil {
			t.Fatal(err)
		}
		return p, m
	}
	p, m := build(1000)
	ins := p.Inspection
	if ins.HistoryTrimmed == 0 || ins.HistoryTurns >= 399 {
		t.Fatalf("working set of 1000 tokens: %d past turns sent, %d left out", ins.HistoryTurns, ins.HistoryTrimmed)
	}
	if ins.HistoryTurns < 5 || !strings.Contains(p.Request.Messages[len(p.Request.Messages)-2].Content, "q399 ") {
		t.Fatalf("the kept turns and the input are not all there: %d past turns", ins.HistoryTurns)
	}
	// Kept turns (6 × ~40 tokens) plus the working set, far below the window.
	if ins.HistoryTurnTokens > ins.WorkingSet || ins.WorkingSet > 1000+6*60 {
		t.Fatalf("history turns take %d tokens of a working set of %d", ins.HistoryTurnTokens, ins.WorkingSet)
	}
	if !m.WorkingSetFull(ins, 0) {
		t.Fatal("a trimmed working set does not ask for compaction")
	}

	whole, m := build(-1)
	if got := whole.Inspection.HistoryTurns; got != 399 || whole.Inspection.HistoryTrimmed != 0 {
		t.Fatalf("without a working set: %d past turns sent, %d left out; want all 399", got, whole.Inspection.HistoryTrimmed)
	}
	if m.WorkingSetFull(whole.Inspection, 0) {
		t.Fatal("~16k tokens of history in a 128k window asks for compaction without a working set")
	}
	if whole.Inspection.TotalTokens < 4*ins.TotalTokens {
		t.Fatalf("prompt with the working set %d tokens, without %d: not much smaller", ins.TotalTokens, whole.Inspection.TotalTokens)
	}
}

// TestWorkingSetKeepsThePrefixUntilCompaction: turn after turn below the
// working set, each prompt begins with every byte the previous one sent
// (the provider's prompt cache keeps hitting) until the working set asks
// for compaction; after it, the prompt is back to the kept turns and the
// summary.
func TestWorkingSetKeepsThePrefixUntilCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	rp := &recordingProvider{reply: "## Archived Session Summary\n\nThe owner asked many questions."}
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Now: func() time.Time { return time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC) }, Summariser: rp}, prompt.Config{Window: 128000, HistoryTokens: 800, Compaction: prompt.CompactionConfig{KeepTurns: 3}})
	var prev []llm.Message
	var prevSystem string
	full := -1
	for i := 0; i < 200 && full < 0; i++ {
		u, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web",
			Content: fmt.Sprintf("question %d about something the owner wants to know", i), Visible: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: u.ID})
		if err != nil {
			t.Fatal(err)
		}
		msgs := p.Request.Messages
		if prev != nil {
			if p.Request.System+p.Request.SystemContext != prevSystem || len(msgs) < len(prev) || !reflect.DeepEqual(msgs[:len(prev)-1], prev[:len(prev)-1]) {
				t.Fatalf("turn %d: the prompt does not begin with the previous one's history", i)
			}
		}
		if m.WorkingSetFull(p.Inspection, 0) {
			full = i
		}
		prev, prevSystem = msgs, p.Request.System+p.Request.SystemContext
		if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "assistant", Source: "agent",
			Content: fmt.Sprintf("answer %d with a few words of explanation", i), Visible: true,
			Metadata: services.MessageMeta{ReplyTo: u.ID}.Encode()}); err != nil {
			t.Fatal(err)
		}
	}
	if full < 10 {
		t.Fatalf("the working set asked for compaction at turn %d", full)
	}
	res, err := m.Compact(ctx, "global", "main", "")
	if err != nil || len(res) != 1 || res[0].Turns == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Inspection.HistoryTurns != 3 || !strings.Contains(p.Request.SystemContext, "The owner asked many questions") {
		t.Fatalf("after compaction: %d turns, summary %q", p.Inspection.HistoryTurns, p.Request.SystemContext)
	}
	if m.WorkingSetFull(p.Inspection, 0) {
		t.Fatal("the working set is still full right after compaction")
	}
}

// hangingProvider never answers: it waits until its call is given up.
type hangingProvider struct{ recordingProvider }

func (h *hangingProvider) Complete(ctx context.Context, _ llm.Request, _ func(string)) (*llm.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestSummaryTimeoutMovesNothing: a summary call that does not answer
// within the compaction's timeout (120 s by default) fails with
// CONTEXT_SUMMARY_TIMEOUT naming the limit, and the cursor stays.
func TestSummaryTimeoutMovesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seedTurns(t, s, "global", 6, "talk")
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Summariser: &hangingProvider{}}, prompt.Config{Window: 16000, Compaction: prompt.CompactionConfig{KeepTurns: 2, Timeout: 200 * time.Millisecond}})
	_, err := m.Compact(ctx, "global", "main", "")
	if services.ErrorCode(err) != prompt.CodeSummaryTimeout || !strings.Contains(services.ErrorMessage(err), "did not answer within 200ms") {
		t.Fatalf("err = %v (code %q)", err, services.ErrorCode(err))
	}
	if sum, err := s.GetSummary(ctx, "global", "global"); err == nil && sum.UntilMessageID != 0 {
		t.Fatalf("the cursor moved to %d", sum.UntilMessageID)
	}
}
