package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestWorkingSetCompactsWithoutUsage: with a 128k window, a model server
// that reports no usage and a small working set (CONTEXT_HISTORY_TOKENS),
// the conversation is compacted once its history fills the working set,
// counted with the tokenizer, and the summary is written by
// CONTEXT_SUMMARY_MODEL.
func TestWorkingSetCompactsWithoutUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{window: 128000, keepTurns: 2, configure: func(o *app.Config) {
		o.Context.HistoryTokens = 600
		o.SummaryModel = "summariser-small"
	}})
	var summaryModel atomic.Value
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			summaryModel.Store(r.Model)
			return llmtest.Text(validSummary)
		}
		return llmtest.Reply{Text: "an answer of some length: " + strings.Repeat("words ", 60), NoUsage: true}
	})
	for i := 0; i < 12; i++ {
		b.say(t, "question "+strings.Repeat("detail ", 20))
		b.waitVisible(t, 2*(i+1))
	}
	waitUntil(t, "a summary segment", func() bool {
		segs, err := b.store.ListSegments(context.Background(), "global", "global")
		return err == nil && len(segs) > 0
	})
	if got, _ := summaryModel.Load().(string); got != "summariser-small" {
		t.Fatalf("summary written by %q, want CONTEXT_SUMMARY_MODEL", got)
	}
	b.say(t, "one more")
	msgs := b.waitVisible(t, 26)
	if got := msgs[len(msgs)-1].Content; !strings.HasPrefix(got, "an answer") {
		t.Fatalf("after compaction: %q", got)
	}
}

// TestSummaryTimeoutTellsTheOwner: a summary call that does not answer
// within the compaction timeout (120 s unless configured) moves nothing,
// and the owner is told once, on the timeline, why.
func TestSummaryTimeoutTellsTheOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{window: 128000, keepTurns: 1, configure: func(o *app.Config) {
		o.Context.HistoryTokens = 500
		o.Context.Compaction.Timeout = 300 * time.Millisecond
	}})
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			return llmtest.Reply{Text: validSummary, Delay: time.Minute}
		}
		return llmtest.Text("an answer of some length: " + strings.Repeat("words ", 60))
	})
	n := 0
	for i := 0; i < 8; i++ {
		b.say(t, "question "+strings.Repeat("detail ", 20))
		n += 2
		b.waitVisible(t, n)
	}
	var notice string
	waitUntil(t, "the owner's notice", func() bool {
		page, err := b.chat.Timeline(context.Background(), "global", 0, 0, 500)
		if err != nil {
			return false
		}
		for _, m := range page.Messages {
			if strings.Contains(m.Content, "could not archive") {
				notice = m.Content
				return true
			}
		}
		return false
	})
	if !strings.Contains(notice, "did not answer within 300ms") {
		t.Fatalf("notice does not say why: %q", notice)
	}
	if sum, err := b.store.GetSummary(context.Background(), "global", "global"); err == nil && sum.UntilMessageID != 0 {
		t.Fatalf("the cursor moved to %d", sum.UntilMessageID)
	}
}
