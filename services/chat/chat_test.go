package chat_test

import (
	"context"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type recorder struct {
	mu     sync.Mutex
	events []services.Event
	turns  []int64
	store  services.Store
	t      *testing.T
}

func (r *recorder) Publish(ctx context.Context, e services.Event) error {
	// Published after commit: the row must already be readable.
	if _, err := r.store.GetMessage(ctx, e.ID); err != nil {
		r.t.Errorf("event %d published before its row was committed: %v", e.ID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return nil
}

func (r *recorder) StartTurn(_ context.Context, _ services.Tx, m services.Message) (func(context.Context), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns = append(r.turns, m.ID)
	return nil, nil
}

func setup(t *testing.T, scopedWrite bool) (*chat.Service, *recorder, services.Store) {
	store := dbtest.Store(t)
	rec := &recorder{store: store, t: t}
	svc := chat.New(chat.Deps{Store: store, Publisher: rec, Turns: rec, CountTokens: func(s string) int { return len(s) / 2 }},
		chat.Config{ScopedWrite: scopedWrite})
	return svc, rec, store
}

func TestPostStoresPublishesAndHandsTurnOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, rec, _ := setup(t, true)
	p := services.PostParams{TimelineScope: "global", Source: "telegram", Content: "hello there", DedupeKey: "tg:update:5"}
	m, created, err := svc.Post(ctx, p)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if m.ContextScope != "main" || !m.Visible || m.Source != "telegram" || m.Role != "user" || m.TokenCount != 5 {
		t.Fatalf("stored: %+v", m)
	}
	again, created, err := svc.Post(ctx, p)
	if err != nil || created || again.ID != m.ID {
		t.Fatalf("duplicate delivery: %v %v %d", created, err, again.ID)
	}
	if len(rec.events) != 1 || rec.events[0].ID != m.ID || rec.events[0].TimelineScope != "global" {
		t.Fatalf("events: %+v", rec.events)
	}
	if len(rec.turns) != 1 {
		t.Fatalf("turns: %v (a duplicate must not start a second run)", rec.turns)
	}
	// Assistant messages publish but start no turn.
	if _, _, err := svc.Post(ctx, services.PostParams{TimelineScope: "global", Source: "agent", Role: "assistant", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if len(rec.turns) != 1 || len(rec.events) != 2 {
		t.Fatalf("assistant message: turns %d events %d", len(rec.turns), len(rec.events))
	}
}

func TestPostValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, rec, _ := setup(t, false)
	for _, tc := range []struct {
		p    services.PostParams
		kind string
	}{
		{services.PostParams{Source: "web", Content: "x"}, services.EINVALID},
		{services.PostParams{TimelineScope: "global", Source: "fax", Content: "x"}, services.EINVALID},
		{services.PostParams{TimelineScope: "global", Source: "web", Content: " \n\t"}, services.EINVALID},
		{services.PostParams{TimelineScope: "global", Source: "web", Content: "\xff\xfe"}, services.EINVALID},
		{services.PostParams{TimelineScope: "global", Source: "web", Content: string(make([]byte, chat.DefaultMaxContentBytes+1))}, services.ETOOLARGE},
	} {
		if _, _, err := svc.Post(ctx, tc.p); !services.IsKind(err, tc.kind) {
			t.Errorf("%+.30v: want %s, got %v", tc.p, tc.kind, err)
		}
	}
	if len(rec.events) != 0 || len(rec.turns) != 0 {
		t.Fatal("rejected posts published or started turns")
	}
}

func TestTimelinesNeverSeeEachOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _, _ := setup(t, false)
	for _, tl := range []string{"global", "tg:1", "global", "tg:2"} {
		if _, _, err := svc.Post(ctx, services.PostParams{TimelineScope: tl, Source: "telegram", Content: "to " + tl}); err != nil {
			t.Fatal(err)
		}
	}
	for tl, want := range map[string]int{"global": 2, "tg:1": 1, "tg:2": 1, "tg:3": 0} {
		page, err := svc.Timeline(ctx, tl, 0, 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) != want {
			t.Fatalf("%s: %d messages, want %d", tl, len(page.Messages), want)
		}
		for _, m := range page.Messages {
			if m.TimelineScope != tl || m.Content != "to "+tl {
				t.Fatalf("%s leaked %+v", tl, m)
			}
		}
	}
}

// txRouter is a reply router that records whether it ran inside the reply's
// transaction, and fails when told to.
type txRouter struct {
	inTx bool
	fail error
}

func (r *txRouter) RouteReplyTx(_ context.Context, tx services.Tx, _ services.Message, _ services.Message) error {
	r.inTx = tx != nil && tx.DriverTx() != nil
	return r.fail
}

// TestReplyAndItsDeliveryCommitTogether: a reply's delivery is scheduled in
// the reply's own transaction; when it cannot be scheduled, the reply is
// not stored either (the run's job retries both), and a reply the router
// refuses as invalid is stored all the same.
func TestReplyAndItsDeliveryCommitTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := dbtest.Store(t)
	router := &txRouter{fail: services.Errorf(services.EUNAVAILABLE, "queue down")}
	svc := chat.New(chat.Deps{Store: store, Routers: map[services.Source]services.ReplyRouter{"telegram": router}}, chat.Config{})
	q, _, err := svc.Post(ctx, services.PostParams{TimelineScope: "global", Source: "telegram", Content: "question"})
	if err != nil {
		t.Fatal(err)
	}
	reply := services.PostParams{TimelineScope: "global", Source: "agent", Role: "assistant", Content: "answer", ReplyTo: q.ID, DedupeKey: "run:1:answer"}
	if _, _, err := svc.Post(ctx, reply); !services.IsKind(err, services.EUNAVAILABLE) {
		t.Fatalf("reply whose delivery cannot be scheduled: %v; want EUNAVAILABLE", err)
	}
	if !router.inTx {
		t.Fatal("the router ran outside the reply's transaction")
	}
	if page, _ := svc.Timeline(ctx, "global", 0, 0, 10); len(page.Messages) != 1 {
		t.Fatalf("timeline has %d messages; the reply must not be stored without its delivery", len(page.Messages))
	}
	router.fail = services.Errorf(services.EINVALID, "no chat id")
	if _, created, err := svc.Post(ctx, reply); err != nil || !created {
		t.Fatalf("reply the router refuses as invalid: created=%v err=%v; want stored", created, err)
	}
}
