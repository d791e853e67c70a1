package prompt_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

// TestArchivedHandoffsEnterTheRetrievedLayerByRelevance: a handoff whose
// turn was compacted away comes back in the retrieved layer when the input
// shares its words, the most relevant first; an unrelated input, a handoff
// still in history, another timeline's handoff and the legacy read path
// bring nothing.
func TestArchivedHandoffsEnterTheRetrievedLayerByRelevance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	handoff := func(timeline string, run int64, summary, result string) int64 {
		body, _ := json.Marshal(map[string]any{"version": 1, "kind": "handoff", "run_id": run, "agent_id": "researcher",
			"mode": "subagent", "status": "ok", "summary": summary, "result": result})
		m, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: timeline, ContextScope: "main", Role: "tool", Source: "agent",
			Content: string(body), Metadata: services.MessageMeta{Kind: services.MetaHandoff, ChildRunID: run, ToolName: "delegate"}.Encode()})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	seedTurns(t, s, "global", 2, "hello")
	handoff("global", 7, "The billing export writes CSV with semicolons.", "Details: billing export job runs nightly; semicolon separated CSV.")
	handoff("global", 8, "The garden sensors report every hour.", "")
	handoff("global", 9, "Billing totals are in cents.", "")
	handoff("tg:2", 10, "Billing export of another person.", "")
	archivedUntil := seedTurns(t, s, "global", 1, "archived turn")
	if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: 1, UntilMessageID: archivedUntil,
		SummaryText: "## Archived Session Summary\nEarlier talk.", TokenCount: 8}); err != nil {
		t.Fatal(err)
	}
	handoff("global", 11, "Billing export, still in history.", "")
	build := func(scoped bool, input string) string {
		t.Helper()
		q, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Visible: true, Content: input})
		if err != nil {
			t.Fatal(err)
		}
		m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 16000, ScopedRead: scoped})
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: q.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range p.Request.Messages {
			if strings.HasPrefix(msg.Content, "## Retrieved for this turn") {
				return msg.Content
			}
		}
		return ""
	}
	got := build(true, "How does the billing export work?")
	i7, i9 := strings.Index(got, "run 7"), strings.Index(got, "run 9")
	if i7 < 0 || i9 < 0 || i7 > i9 || !strings.Contains(got, "semicolon separated CSV") {
		t.Fatalf("retrieved layer, the billing export handoff first:\n%s", got)
	}
	for _, not := range []string{"garden", "another person", "still in history"} {
		if strings.Contains(got, not) {
			t.Fatalf("retrieved %q:\n%s", not, got)
		}
	}
	if got := build(true, "What about the weather?"); got != "" {
		t.Fatalf("an unrelated input retrieved:\n%s", got)
	}
	if got := build(false, "How does the billing export work?"); got != "" {
		t.Fatalf("the legacy read path retrieved:\n%s", got)
	}

	// /new (a reset segment): nothing from before it comes back unasked;
	// a handoff archived after it does.
	reset := seedTurns(t, s, "global", 1, "/new")
	if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", Kind: services.SegmentReset,
		FromMessageID: reset, UntilMessageID: reset}); err != nil {
		t.Fatal(err)
	}
	if got := build(true, "How does the billing export work?"); got != "" {
		t.Fatalf("after /new the retrieved layer brought back what came before it:\n%s", got)
	}
	handoff("global", 12, "The billing export moved to JSON.", "")
	until := seedTurns(t, s, "global", 1, "archived after the reset")
	if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: reset + 1, UntilMessageID: until,
		SummaryText: "## Archived Session Summary\nLater talk.", TokenCount: 8}); err != nil {
		t.Fatal(err)
	}
	got = build(true, "How does the billing export work?")
	if !strings.Contains(got, "run 12") || strings.Contains(got, "run 7") {
		t.Fatalf("after /new, a handoff archived since should be retrieved and none before:\n%s", got)
	}
}
