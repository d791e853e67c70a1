package repository_test

import (
	"context"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

func TestSummaryCursorsPerTimelineAndScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	if _, err := s.GetSummary(ctx, "global", "main"); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("missing summary: want ENOTFOUND, got %v", err)
	}
	for _, sc := range []struct {
		timeline, scope string
		until           int64
	}{{"global", "global", 10}, {"global", "main", 20}, {"tg:5", "main", 30}} {
		if _, err := s.UpsertSummary(ctx, services.Summary{TimelineScope: sc.timeline, Scope: sc.scope, UntilMessageID: sc.until, SummaryText: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	// Cursors are independent.
	if _, err := s.UpsertSummary(ctx, services.Summary{TimelineScope: "global", Scope: "main", UntilMessageID: 25, SummaryText: "s2"}); err != nil {
		t.Fatal(err)
	}
	g, _ := s.GetSummary(ctx, "global", "global")
	m, _ := s.GetSummary(ctx, "global", "main")
	o, _ := s.GetSummary(ctx, "tg:5", "main")
	if g.UntilMessageID != 10 || m.UntilMessageID != 25 || m.SummaryText != "s2" || o.UntilMessageID != 30 {
		t.Fatalf("cursors: global=%d main=%d tg=%d", g.UntilMessageID, m.UntilMessageID, o.UntilMessageID)
	}
	// A cursor never moves backwards.
	if _, err := s.UpsertSummary(ctx, services.Summary{TimelineScope: "global", Scope: "main", UntilMessageID: 5, SummaryText: "old"}); !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("backwards cursor: want ECONFLICT, got %v", err)
	}
	m, _ = s.GetSummary(ctx, "global", "main")
	if m.UntilMessageID != 25 || m.SummaryText != "s2" {
		t.Fatalf("refused upsert changed the row: %+v", m)
	}
	if _, err := s.UpsertSummary(ctx, services.Summary{Scope: "main"}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("no timeline: want EINVALID, got %v", err)
	}
}

// TestSummaryOfTheSameTurnsStoredOnce: two compactions that summarised the
// same turns (a /compact racing a compaction job, a job rerun after a
// crash) store one summary: the second starts at or before the cursor and
// is refused with ECONFLICT, leaving everything as the first left it.
func TestSummaryOfTheSameTurnsStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seg := services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: 3, UntilMessageID: 9, SummaryText: "first"}
	if _, err := s.AppendSegment(ctx, seg); err != nil {
		t.Fatal(err)
	}
	seg.SummaryText = "second"
	if _, err := s.AppendSegment(ctx, seg); !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("same turns again: want ECONFLICT, got %v", err)
	}
	segs, _ := s.ListSegments(ctx, "global", "main")
	sum, _ := s.GetSummary(ctx, "global", "main")
	if len(segs) != 1 || segs[0].SummaryText != "first" || sum.SummaryText != "first" || sum.UntilMessageID != 9 {
		t.Fatalf("after the refused duplicate: %d segments, cursor %+v", len(segs), sum)
	}
	// The next turns still go on.
	if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: 10, UntilMessageID: 15, SummaryText: "next"}); err != nil {
		t.Fatal(err)
	}
	// A reset (/new) is not a summary: it may start anywhere after the cursor.
	if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", Kind: services.SegmentReset, FromMessageID: 16, UntilMessageID: 16}); err != nil {
		t.Fatal(err)
	}
}
