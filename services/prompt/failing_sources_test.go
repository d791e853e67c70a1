package prompt_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

// brokenRecall is the recall index failing (the real store behind it for
// everything else).
type brokenRecall struct{ services.RecallStore }

func (brokenRecall) SearchRecall(context.Context, services.RecallQuery) ([]services.RecallHit, error) {
	return nil, services.Errorf(services.EUNAVAILABLE, "recall index: connection reset")
}

// brokenMemory is the remembered settings failing.
type brokenMemory struct{ services.ContextStore }

func (brokenMemory) ListMemory(context.Context, string) ([]services.MemoryItem, error) {
	return nil, errors.New("memory_items: canceling statement due to statement timeout")
}

// brokenBudgets is the budget profile failing.
type brokenBudgets struct{}

func (brokenBudgets) ContextBudget(context.Context, string) (services.ContextBudget, error) {
	return services.ContextBudget{}, errors.New("context_budgets: connection refused")
}

func (brokenBudgets) PutContextBudget(context.Context, string, services.ContextBudget) (services.ContextBudget, error) {
	panic("not used")
}

// TestFailingSourcesAreSkippedAndNamed: a source that fails while a turn's
// prompt is built — the recall index, the remembered settings, the budget
// profile — is skipped with a warning naming it (CONTEXT_SOURCE_UNAVAILABLE,
// CONTEXT_BUDGET_FALLBACK), and the prompt is built with the rest: the
// history and the input are there. (The manifest file and a pinned file
// failing are tested through the real server: TestFailingPinSourcesAreSkipped.)
func TestFailingSourcesAreSkippedAndNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seedTurns(t, s, "global", 2, "hello")
	archivedUntil := seedTurns(t, s, "global", 1, "archived turn")
	if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: 1, UntilMessageID: archivedUntil,
		SummaryText: "## Archived Session Summary\nEarlier talk.", TokenCount: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: "tz", Value: "Europe/Paris", Confidence: 0.9}); err != nil {
		t.Fatal(err)
	}
	q, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Visible: true,
		Content: "How does the billing export work?"})
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, prompt.Deps{Store: s, Context: brokenMemory{s}, Recall: brokenRecall{s}, Budgets: brokenBudgets{}}, prompt.Config{Window: 16000, ScopedRead: true})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: q.ID})
	if err != nil {
		t.Fatalf("a failing source failed the build: %v", err)
	}
	codes := map[string]string{}
	for _, w := range p.Inspection.Warnings {
		codes[w.Code] = w.Message
	}
	src := codes[prompt.CodeSourceUnavailable]
	if !strings.Contains(src, "the recall index could not be read, archived handoffs skipped: recall index: connection reset") ||
		!strings.Contains(src, "remembered settings could not be read, settings skipped") {
		t.Fatalf("CONTEXT_SOURCE_UNAVAILABLE: %q (warnings %+v)", src, p.Inspection.Warnings)
	}
	if !strings.Contains(codes[prompt.CodeBudgetFallback], "the budget profile could not be read, the default is used") {
		t.Fatalf("CONTEXT_BUDGET_FALLBACK: %+v", p.Inspection.Warnings)
	}
	last := p.Request.Messages[len(p.Request.Messages)-1].Content
	if !strings.Contains(last, "How does the billing export work?") || strings.Contains(p.Request.System, "Europe/Paris") ||
		!strings.Contains(p.Request.SystemContext, "Earlier talk.") {
		t.Fatalf("the prompt without the failing sources: system %q, last %q", p.Request.System, last)
	}
	if prompt.CodeKind(prompt.CodeSourceUnavailable) != services.EUNAVAILABLE {
		t.Fatal("CONTEXT_SOURCE_UNAVAILABLE has no kind")
	}
}
