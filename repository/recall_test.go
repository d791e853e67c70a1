package repository_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// recallFixture stores one row per kind of row the recall view must judge,
// each containing the word "zebra" and its own label.
func recallFixture(t *testing.T, s *repository.Store) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	rows := []struct {
		label string
		m     services.NewMessage
	}{
		{"main-visible", services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Visible: true}},
		{"main-hidden", services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "tool", Source: "agent",
			Metadata: services.MessageMeta{ToolName: "read_file"}.Encode()}},
		{"main-handoff", services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "tool", Source: "agent",
			Metadata: services.MessageMeta{Kind: services.MetaHandoff, ChildRunID: 5, ToolName: "delegate"}.Encode()}},
		{"handoff-marker", services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "assistant", Source: "agent", Visible: true,
			Metadata: services.MessageMeta{Kind: services.MetaHandoff, ChildRunID: 5}.Encode()}},
		{"child", services.NewMessage{TimelineScope: "global", ContextScope: "run:5", Role: "assistant", Source: "agent"}},
		{"sibling", services.NewMessage{TimelineScope: "global", ContextScope: "sub:researcher:6", Role: "assistant", Source: "agent"}},
		{"sched", services.NewMessage{TimelineScope: "global", ContextScope: "sched:3", Role: "assistant", Source: "agent"}},
		{"other-timeline", services.NewMessage{TimelineScope: "tg:9", ContextScope: "main", Role: "user", Source: "telegram", Visible: true}},
		{"notice", services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "assistant", Source: "system", Visible: true}},
		{"command", services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Visible: true,
			Metadata: services.MessageMeta{Command: "status"}.Encode()}},
		{"offline", services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "assistant", Source: "agent", Visible: true,
			Metadata: services.MessageMeta{Notice: services.NoticeOfflineModel}.Encode()}},
	}
	ids := map[string]int64{}
	for _, r := range rows {
		r.m.Content = "the zebra " + r.label + " crossed"
		m, _, err := s.InsertMessage(ctx, r.m)
		if err != nil {
			t.Fatal(err)
		}
		ids[r.label] = m.ID
	}
	return ids
}

func labelsOf(ids map[string]int64, got []int64) string {
	byID := map[int64]string{}
	for l, id := range ids {
		byID[id] = l
	}
	var out []string
	for _, id := range got {
		out = append(out, byID[id])
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// TestRecallViews: main recalls its own scope (visible rows and its hidden
// steps, the handoffs included), never a child's, a schedule's, another
// timeline's, the service's notices, commands, offline answers or handoff
// markers; a child recalls its own rows and main's visible rows only; reads
// by id obey the same view.
func TestRecallViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	ids := recallFixture(t, s)
	search := func(v services.RecallView, extra ...func(*services.RecallQuery)) []int64 {
		q := services.RecallQuery{View: v, Terms: []string{"zebra"}, Kind: services.RecallMessage, Limit: 50}
		for _, f := range extra {
			f(&q)
		}
		hits, err := s.SearchRecall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, h := range hits {
			if h.Tokens <= 0 || h.Score <= 0 || h.Score >= 1 || !q.HandoffsOnly && !strings.Contains(h.Snippet, "**zebra**") {
				t.Fatalf("hit: %+v", h)
			}
			out = append(out, h.ID)
		}
		return out
	}
	main := services.NewRecallView("global", "main", "main")
	if got := labelsOf(ids, search(main)); got != "main-handoff,main-hidden,main-visible" {
		t.Fatalf("main recalls %s", got)
	}
	child := services.NewRecallView("global", "run:5", "main")
	if got := labelsOf(ids, search(child)); got != "child,main-handoff,main-visible" {
		t.Fatalf("child recalls %s", got)
	}
	sched := services.NewRecallView("global", "sched:3", "main")
	if got := labelsOf(ids, search(sched)); got != "main-handoff,main-visible,sched" {
		t.Fatalf("schedule recalls %s", got)
	}
	other := services.NewRecallView("tg:9", "main", "main")
	if got := labelsOf(ids, search(other)); got != "other-timeline" {
		t.Fatalf("other timeline recalls %s", got)
	}
	if got := labelsOf(ids, search(main, func(q *services.RecallQuery) { q.HandoffsOnly = true })); got != "main-handoff" {
		t.Fatalf("main's handoffs: %s", got)
	}
	if got := labelsOf(ids, search(main, func(q *services.RecallQuery) { q.MaxID = ids["main-hidden"] })); got != "main-hidden,main-visible" {
		t.Fatalf("MaxID ignored: %s", got)
	}
	if got := search(main, func(q *services.RecallQuery) { q.After = time.Now().Add(time.Hour) }); len(got) != 0 {
		t.Fatalf("After ignored: %v", got)
	}

	// Reads by id: what is outside the view reads as absent.
	all := make([]int64, 0, len(ids))
	for _, id := range ids {
		all = append(all, id)
	}
	msgs, err := s.RecallMessages(ctx, main, all)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, m := range msgs {
		got = append(got, m.ID)
	}
	if l := labelsOf(ids, got); l != "main-handoff,main-hidden,main-visible" {
		t.Fatalf("main reads by id %s", l)
	}
	if _, err := s.RecallAround(ctx, main, ids["child"], 2, 2); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("main read a child's row around it: %v", err)
	}
	around, err := s.RecallAround(ctx, child, ids["child"], 5, 5)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, m := range around {
		got = append(got, m.ID)
	}
	if l := labelsOf(ids, got); l != "child,main-handoff,main-visible" {
		t.Fatalf("around the child's row: %s", l)
	}
}

// TestRecallSummariesAndTerms: segments are searched in the view's summary
// scopes only (before a reset too); all terms must match unless AnyTerm.
func TestRecallSummariesAndTerms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	for _, seg := range []services.Segment{
		{TimelineScope: "global", Scope: "main", FromMessageID: 1, UntilMessageID: 2, SummaryText: "We chose PostgreSQL for the archive.", TokenCount: 9},
		{TimelineScope: "global", Scope: "global", FromMessageID: 1, UntilMessageID: 2, SummaryText: "Legacy copy: PostgreSQL chosen.", TokenCount: 7},
		{TimelineScope: "global", Scope: "main", Kind: services.SegmentReset, FromMessageID: 3, UntilMessageID: 3, SummaryText: "reset"},
		{TimelineScope: "tg:1", Scope: "main", FromMessageID: 1, UntilMessageID: 2, SummaryText: "Their PostgreSQL talk.", TokenCount: 5},
	} {
		if _, err := s.AppendSegment(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Visible: true,
		Content: "should we use postgresql or sqlite"}); err != nil {
		t.Fatal(err)
	}
	q := services.RecallQuery{View: services.NewRecallView("global", "main", "main"), Terms: services.RecallTerms("PostgreSQL archive?"), Limit: 10}
	hits, err := s.SearchRecall(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Kind != services.RecallSummary || hits[0].Ref() == "" || hits[0].UntilID != 2 || hits[0].Tokens != 9 {
		t.Fatalf("all-terms search: %+v", hits)
	}
	q.AnyTerm = true
	hits, err = s.SearchRecall(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].Kind != services.RecallSummary || hits[1].Kind != services.RecallMessage {
		t.Fatalf("any-term search, the summary matching both words first: %+v", hits)
	}
	// A child reads main's summaries (its observations may quote them),
	// not another timeline's; main reads the legacy copy only on the legacy
	// path.
	all, err := s.SearchRecall(ctx, services.RecallQuery{View: services.NewRecallView("global", "run:4", "main"), Terms: []string{"postgresql"}, Kind: services.RecallSummary, Limit: 10})
	if err != nil || len(all) != 1 || all[0].ID != hits[0].ID {
		t.Fatalf("a child's summaries: %+v %v", all, err)
	}
	legacy, err := s.SearchRecall(ctx, services.RecallQuery{View: services.NewRecallView("global", "main", "global"), Terms: []string{"postgresql"}, Kind: services.RecallSummary, Limit: 10})
	if err != nil || len(legacy) != 1 || !strings.Contains(legacy[0].Snippet, "Legacy copy") {
		t.Fatalf("legacy path summaries: %+v %v", legacy, err)
	}
	segs, err := s.RecallSegments(ctx, services.NewRecallView("tg:1", "main", "main"), []int64{hits[0].ID})
	if err != nil || len(segs) != 0 {
		t.Fatalf("another timeline read this one's summary: %v %v", segs, err)
	}
	if _, err := s.SearchRecall(ctx, services.RecallQuery{View: q.View}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("a search without words: %v", err)
	}
}

// TestRecallIndexTakesLongRows: a row far longer than what is indexed is
// stored (the index never refuses an insert) and found by an early word.
func TestRecallIndexTakesLongRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	var b strings.Builder
	b.WriteString("okapi ")
	for i := 0; b.Len() < 600_000; i++ {
		b.WriteString("w")
		b.WriteString(strings.Repeat(string(rune('a'+i%26)), 1+i%40))
		b.WriteString(" ")
	}
	m, _, err := s.InsertMessage(ctx, services.NewMessage{Role: "tool", Source: "agent", Content: b.String()})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := s.SearchRecall(ctx, services.RecallQuery{View: services.NewRecallView("global", "main", "main"), Terms: []string{"okapi"}, Limit: 5})
	if err != nil || len(hits) != 1 || hits[0].ID != m.ID {
		t.Fatalf("hits %+v err %v", hits, err)
	}
}
