package repository_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// TestPromptSourcesReadInOneStatementMatchTheSeparateReads: a prompt
// build reads its budget profile, rules, remembered items, summary cursor
// and segments in one statement (ReadPromptSources); each part is what
// the store's own read of it returns (times to the microsecond), on a
// timeline that has all of them and on one that has none.
func TestPromptSourcesReadInOneStatementMatchTheSeparateReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	prof := services.DefaultContextBudget()
	if _, err := s.PutContextBudget(ctx, "global", prof); err != nil {
		t.Fatal(err)
	}
	for _, c := range []services.Constraint{
		{TimelineScope: "global", Text: "answer in English", Hard: true, Check: `(?i)\bbonjour\b`},
		{TimelineScope: "global", Text: "be brief"},
		{TimelineScope: "tg:7", Text: "another timeline's rule"},
	} {
		if _, err := s.CreateConstraint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []services.MemoryItem{
		{TimelineScope: "global", Key: "tone", Value: "dry \"quotes\" and \\ slashes", Confidence: 0.9, Source: "owner"},
		{TimelineScope: "global", Key: "name", Value: "Ada", Confidence: 0.35, Source: "agent"},
	} {
		if _, err := s.UpsertMemory(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, seg := range []services.Segment{
		{TimelineScope: "global", Scope: "main", FromMessageID: 1, UntilMessageID: 4, SummaryText: "before the reset"},
		{TimelineScope: "global", Scope: "main", Kind: services.SegmentReset, FromMessageID: 5, UntilMessageID: 5},
		{TimelineScope: "global", Scope: "main", FromMessageID: 6, UntilMessageID: 9, SummaryText: "they spoke of\tlists\n- one", TaintedBy: "web:https://example.com", Focus: "lists"},
	} {
		if _, err := s.AppendSegment(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	for _, tl := range []string{"global", "tg:9"} {
		got, err := s.ReadPromptSources(ctx, tl, "main")
		if err != nil {
			t.Fatal(err)
		}
		var want services.PromptSources
		want.Budget, want.BudgetErr = s.ContextBudget(ctx, tl)
		if want.Rules, err = s.ListConstraints(ctx, tl); err != nil {
			t.Fatal(err)
		}
		if want.Memory, err = s.ListMemory(ctx, tl); err != nil {
			t.Fatal(err)
		}
		if sum, err := s.GetSummary(ctx, tl, "main"); err == nil {
			sum.SummaryText = "" // not read: the build needs the cursor only
			want.Summary = sum
		} else if !services.IsKind(err, services.ENOTFOUND) {
			t.Fatal(err)
		}
		if want.Segments, err = s.ListSegments(ctx, tl, "main"); err != nil {
			t.Fatal(err)
		}
		if tl == "global" && (len(want.Rules) != 2 || len(want.Memory) != 2 || len(want.Segments) != 1 || want.Summary.UntilMessageID != 9 || want.Budget.Version != 1) {
			t.Fatalf("the separate reads do not see the fixture: %+v", want)
		}
		normalise(&got)
		normalise(&want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: one statement read\n%+v\nthe separate reads\n%+v", tl, got, want)
		}
	}
}

// normalise makes the times of p comparable (UTC, microseconds) and empty
// lists nil.
func normalise(p *services.PromptSources) {
	p.Summary.UpdatedAt = p.Summary.UpdatedAt.UTC().Truncate(1000)
	for i := range p.Rules {
		p.Rules[i].UpdatedAt = p.Rules[i].UpdatedAt.UTC().Truncate(1000)
	}
	for i := range p.Memory {
		p.Memory[i].UpdatedAt = p.Memory[i].UpdatedAt.UTC().Truncate(1000)
	}
	for i := range p.Segments {
		p.Segments[i].CreatedAt = p.Segments[i].CreatedAt.UTC().Truncate(1000)
	}
	if len(p.Rules) == 0 {
		p.Rules = nil
	}
	if len(p.Memory) == 0 {
		p.Memory = nil
	}
	if len(p.Segments) == 0 {
		p.Segments = nil
	}
}
