package repository_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

func TestInsertMessageDefaultsAndScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)

	legacy, created, err := s.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "hi", Visible: true})
	if err != nil || !created {
		t.Fatalf("insert: created=%v err=%v", created, err)
	}
	if legacy.TimelineScope != "global" || legacy.ContextScope != "main" || legacy.AgentID != "" || !legacy.Visible {
		t.Fatalf("legacy insert did not take defaults: %+v", legacy)
	}
	if string(legacy.Metadata) != "{}" {
		t.Fatalf("metadata default = %s", legacy.Metadata)
	}

	scoped, _, err := s.InsertMessage(ctx, services.NewMessage{
		TimelineScope: "tg:42", ContextScope: "sub:researcher:7", AgentID: "researcher",
		Role: "assistant", Source: "agent", Content: "step", Metadata: json.RawMessage(`{"k":1}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetMessage(ctx, scoped.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.TimelineScope != "tg:42" || got.ContextScope != "sub:researcher:7" || got.AgentID != "researcher" || got.Visible {
		t.Fatalf("scoped row read back wrong: %+v", got)
	}
}

// A row read back carries its metadata decoded (Meta), once, by the store;
// metadata that does not decode as MessageMeta reads as empty.
func TestReadRowsCarryDecodedMeta(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	want := services.MessageMeta{ReplyTo: 3, RunID: 9, ToolCallID: "c1", TelegramMeta: services.TelegramMeta{ChatID: 77}}
	m, _, err := s.InsertMessage(ctx, services.NewMessage{Role: "tool", Source: "agent", Content: "r", Metadata: want.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	bad, _, err := s.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "x", Metadata: json.RawMessage(`{"run_id":"not a number"}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetMessage(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Meta, want) || !reflect.DeepEqual(got.Meta, want) {
		t.Fatalf("meta: inserted %+v, read %+v; want %+v", m.Meta, got.Meta, want)
	}
	if !reflect.DeepEqual(bad.Meta, services.MessageMeta{}) || string(bad.Metadata) == "{}" {
		t.Fatalf("undecodable metadata: meta %+v, raw %s", bad.Meta, bad.Metadata)
	}
}

func TestInsertMessageRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	if _, _, err := s.InsertMessage(ctx, services.NewMessage{Role: "robot", Source: "web", Content: "x"}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("bad role: want EINVALID, got %v", err)
	}
	if _, _, err := s.InsertMessage(ctx, services.NewMessage{Role: "user", Content: "x"}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("empty source: want EINVALID, got %v", err)
	}
	if _, err := s.GetMessage(ctx, 999999); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("missing message: want ENOTFOUND, got %v", err)
	}
}

func TestInsertMessageIdempotentOnDedupeKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	m := services.NewMessage{Role: "user", Source: "telegram", Content: "hello", Visible: true, DedupeKey: "update:1"}
	first, created, err := s.InsertMessage(ctx, m)
	if err != nil || !created {
		t.Fatalf("first insert: %v %v", created, err)
	}
	again, created, err := s.InsertMessage(ctx, m)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("retry stored a second row or failed: created=%v id=%d first=%d err=%v", created, again.ID, first.ID, err)
	}
	// Same key from another source or timeline is a different message.
	other, created, err := s.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "hello", DedupeKey: "update:1"})
	if err != nil || !created || other.ID == first.ID {
		t.Fatalf("key must be scoped by source: %v %v", created, err)
	}
	// Inside a transaction the conflict must not abort the transaction.
	err = s.Transact(ctx, func(tx services.Tx) error {
		if _, created, err := tx.InsertMessage(ctx, m); err != nil || created {
			t.Errorf("in tx: created=%v err=%v", created, err)
		}
		_, _, err := tx.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "after"})
		return err
	})
	if err != nil {
		t.Fatalf("transaction aborted by dedupe conflict: %v", err)
	}
}

func TestListTimelineKeysetPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	var ids []int64
	for i := 0; i < 25; i++ {
		m, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: "m", Visible: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
		// Interleave hidden rows and another timeline's rows: never returned.
		if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "run:1", Role: "tool", Source: "agent", Content: "hidden"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "tg:9", Role: "user", Source: "telegram", Content: "other", Visible: true}); err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	after := int64(0)
	for {
		page, err := s.ListTimeline(ctx, services.TimelineQuery{TimelineScope: "global", AfterID: after, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			if !m.Visible || m.TimelineScope != "global" {
				t.Fatalf("page leaked a row: %+v", m)
			}
			seen = append(seen, m.ID)
		}
		after = page[len(page)-1].ID
	}
	if len(seen) != len(ids) {
		t.Fatalf("forward paging saw %d rows, want %d", len(seen), len(ids))
	}
	for i := range ids {
		if seen[i] != ids[i] {
			t.Fatalf("order differs at %d: %d vs %d", i, seen[i], ids[i])
		}
	}
	// Backwards: the newest 10 before the last id, ascending.
	back, err := s.ListTimeline(ctx, services.TimelineQuery{TimelineScope: "global", BeforeID: ids[24], Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 10 || back[0].ID != ids[14] || back[9].ID != ids[23] {
		t.Fatalf("before page wrong: first=%d last=%d len=%d", back[0].ID, back[len(back)-1].ID, len(back))
	}
	hidden, err := s.ListTimeline(ctx, services.TimelineQuery{TimelineScope: "global", IncludeHidden: true})
	if err != nil || len(hidden) != 50 {
		t.Fatalf("include hidden: len=%d err=%v", len(hidden), err)
	}
}

func TestListContextByScopeAfterCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	insert := func(timeline, scope string, visible bool) int64 {
		m, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: timeline, ContextScope: scope, Role: "user", Source: "web", Content: "x", Visible: visible})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	m1 := insert("global", "main", true)
	insert("global", "sub:a:1", false)
	m3 := insert("global", "main", false)
	insert("tg:1", "main", true)
	m5 := insert("global", "main", true)

	got, err := s.ListContext(ctx, services.ContextQuery{TimelineScope: "global", ContextScope: "main", AfterID: m1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != m3 || got[1].ID != m5 {
		t.Fatalf("scoped read after cursor: %v", ids(got))
	}
	legacy, err := s.ListContext(ctx, services.ContextQuery{TimelineScope: "global", ByTimelineOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(legacy) != 2 || legacy[0].ID != m1 || legacy[1].ID != m5 {
		t.Fatalf("legacy read: %v", ids(legacy))
	}
}

func ids(ms []services.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
