package repository_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// Events one instance publishes, alone or many at once, reach another
// instance on the same schema, all of them and in order.
func TestNotifierDeliversEveryEventInOrder(t *testing.T) {
	ctx, pub, got := listeningPair(t)
	const n = 150 // published in one burst: most go in batches
	for i := range n {
		if err := pub.Publish(ctx, services.Event{Type: "message", TimelineScope: "t", ID: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	want := int64(1)
	for want <= n {
		select {
		case e := <-got:
			if e.Type == "probe" {
				continue
			}
			if e.ID != want {
				t.Fatalf("event %d arrived when %d was due", e.ID, want)
			}
			want++
		case <-ctx.Done():
			t.Fatalf("%d of %d events arrived", want-1, n)
		}
	}
}

// listeningPair is a publishing Notifier and the events another one on
// the same schema hears, once it listens (probes published until one
// arrives; late probes drained).
func listeningPair(t *testing.T) (context.Context, *repository.Notifier, chan services.Event) {
	t.Helper()
	ctx, _, pub, got := listeningPairOn(t)
	return ctx, pub, got
}

// listeningPairOn is listeningPair with the schema's pool.
func listeningPairOn(t *testing.T) (context.Context, *pgxpool.Pool, *repository.Notifier, chan services.Event) {
	t.Helper()
	pool, _ := dbtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pub, err := repository.NewNotifier(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := repository.NewNotifier(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan services.Event, 200)
	listening := make(chan struct{})
	go sub.Listen(ctx, func(e services.Event) { got <- e }, func() {})
	// Listen has no ready signal: publish a probe until it arrives.
	go func() {
		defer close(listening)
		for {
			select {
			case e := <-got:
				if e.Type == "probe" {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	for probe := true; probe; {
		_ = pub.Publish(ctx, services.Event{Type: "probe", TimelineScope: "t"})
		select {
		case <-listening:
			probe = false
		case <-time.After(100 * time.Millisecond):
		}
	}
	pub.Flush(ctx) // late probes: sent before the test's events
	for len(got) > 0 {
		<-got
	}
	return ctx, pool, pub, got
}

// An event published with a transaction reaches the other instances when
// it commits, nothing of it when it rolls back, and the events published
// before it and still waiting for the sender (a run's streamed text) go
// first, in the same statement: here within the sender's linger of 2 s,
// and no statement of their own.
func TestNotifierSendsTransactionEventsWithTheCommit(t *testing.T) {
	ctx, pool, pub, got := listeningPairOn(t)
	store := repository.New(pool)
	repository.SetLinger(pub, 2*time.Second)
	before := repository.Sends(pub)
	if err := pub.Publish(ctx, services.Event{Type: "delta", TimelineScope: "t", ID: 1}); err != nil {
		t.Fatal(err)
	}
	rolledBack := errors.New("rolled back")
	err := store.Transact(ctx, func(tx services.Tx) error {
		if err := pub.PublishTx(ctx, tx, services.Event{Type: "message", TimelineScope: "t", ID: 2}); err != nil {
			return err
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	if err := store.Transact(ctx, func(tx services.Tx) error {
		return pub.PublishTx(ctx, tx, services.Event{Type: "message", TimelineScope: "t", ID: 3})
	}); err != nil {
		t.Fatal(err)
	}
	wants := []int64{1, 3}
	for len(wants) > 0 {
		select {
		case e := <-got:
			if e.Type == "probe" {
				continue
			}
			if e.ID != wants[0] {
				t.Fatalf("event %d arrived when %d was due", e.ID, wants[0])
			}
			wants = wants[1:]
		case <-time.After(time.Second):
			t.Fatalf("event %d did not come with the commit", wants[0])
		}
	}
	pub.Flush(ctx)
	if n := repository.Sends(pub) - before; n != 1 {
		t.Fatalf("the events took %d statements; want 1 (the transaction's)", n)
	}
	for len(got) > 0 {
		if e := <-got; e.Type != "probe" {
			t.Fatalf("event %d arrived after the commit's", e.ID)
		}
	}
}

// Events published a few milliseconds apart, as a turn's are, go to the
// other instances in one statement (one commit), not one each: the first
// waits out the linger for the rest. With a linger of 2 s the first is
// not sent within 200 ms, and the one published after that joins it.
func TestNotifierSendsEventsPublishedTogetherInOneStatement(t *testing.T) {
	ctx, pub, got := listeningPair(t)
	repository.SetLinger(pub, 2*time.Second)
	before := repository.Sends(pub)
	if err := pub.Publish(ctx, services.Event{Type: "message", TimelineScope: "t", ID: 1}); err != nil {
		t.Fatal(err)
	}
	for quiet := time.After(200 * time.Millisecond); quiet != nil; {
		select {
		case e := <-got:
			if e.Type != "probe" {
				t.Fatalf("event %d sent before the linger ended", e.ID)
			}
		case <-quiet:
			quiet = nil
		}
	}
	if err := pub.Publish(ctx, services.Event{Type: "message", TimelineScope: "t", ID: 2}); err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 2; want++ {
		select {
		case e := <-got:
			if e.Type == "probe" {
				want--
				continue
			}
			if e.ID != want {
				t.Fatalf("event %d arrived when %d was due", e.ID, want)
			}
		case <-ctx.Done():
			t.Fatalf("event %d never arrived", want)
		}
	}
	pub.Flush(ctx)
	if n := repository.Sends(pub) - before; n != 1 {
		t.Fatalf("two events published 200 ms apart took %d statements; want 1", n)
	}
}

// A claim announces its run's `running` status to the other instances in
// its own statement, and they hear the event exactly as the Notifier
// encodes a run's status (services.RunEvent), even for a timeline whose
// name reads like the event's own fields.
func TestClaimSendsTheRunningStatusAsTheNotifierEncodesIt(t *testing.T) {
	ctx, pool, pub, got := listeningPairOn(t)
	s := repository.New(pool)
	s.AnnounceClaims(pub)
	const timeline = `tl-"run":9223372036854775807,"d":{}` + "\n\u2028"
	queued, err := s.CreateRun(ctx, services.NewRun{TimelineScope: timeline, Source: "web"})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := s.ClaimNextRun(ctx, timeline)
	if err != nil || run.ID != queued.ID || !run.Announced {
		t.Fatalf("claim = %+v, %v; want run %d claimed and announced", run, err, queued.ID)
	}
	want := services.RunEvent(timeline, run.ID, services.RunRunning)
	select {
	case e := <-got:
		if e.Type != want.Type || e.TimelineScope != want.TimelineScope || e.RunID != want.RunID || string(e.Data) != string(want.Data) || e.Origin == "" {
			t.Fatalf("heard %+v (data %s), want %+v (data %s) with the publisher's origin", e, e.Data, want, want.Data)
		}
	case <-ctx.Done():
		t.Fatal("no event heard for the claim")
	}
}

// A run created with Announce in a transaction sends, in its INSERT, the
// events waiting for the sender, those the transaction published before
// it and its own `queued` status, in that order: the COMMIT needs no
// NOTIFY of its own. When the transaction rolls back after that
// statement, nothing of it is heard and the sender's events it took are
// sent all the same.
func TestCreateRunSendsTheTransactionsEventsWithItsStatus(t *testing.T) {
	ctx, pool, pub, got := listeningPairOn(t)
	store := repository.New(pool)
	store.AnnounceClaims(pub)
	repository.SetLinger(pub, 2*time.Second)
	next := func() services.Event {
		t.Helper()
		for {
			select {
			case e := <-got:
				if e.Type != "probe" {
					return e
				}
			case <-time.After(5 * time.Second):
				t.Fatal("an event did not arrive")
			}
		}
	}

	before := repository.Sends(pub)
	if err := pub.Publish(ctx, services.Event{Type: "delta", TimelineScope: "t", ID: 1}); err != nil {
		t.Fatal(err)
	}
	var run services.Run
	err := store.Transact(ctx, func(tx services.Tx) error {
		if err := pub.PublishTx(ctx, tx, services.Event{Type: "message", TimelineScope: "t", ID: 2}); err != nil {
			return err
		}
		var err error
		run, err = tx.CreateRun(ctx, services.NewRun{TimelineScope: "t", Source: "web", Announce: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !run.Announced {
		t.Fatal("the run was not announced by its insert")
	}
	if e := next(); e.Type != "delta" || e.ID != 1 {
		t.Fatalf("first event %+v; want the delta waiting for the sender", e)
	}
	if e := next(); e.Type != "message" || e.ID != 2 {
		t.Fatalf("second event %+v; want the transaction's message", e)
	}
	if e := next(); e.Type != services.EventRun || e.RunID != run.ID || !strings.Contains(string(e.Data), `"queued"`) {
		t.Fatalf("third event %+v; want run %d queued", e, run.ID)
	}
	if n := repository.Sends(pub) - before; n != 1 {
		t.Fatalf("the events took %d statements; want 1 (the insert)", n)
	}

	rolledBack := errors.New("rolled back")
	if err := pub.Publish(ctx, services.Event{Type: "delta", TimelineScope: "t", ID: 4}); err != nil {
		t.Fatal(err)
	}
	err = store.Transact(ctx, func(tx services.Tx) error {
		if err := pub.PublishTx(ctx, tx, services.Event{Type: "message", TimelineScope: "t", ID: 5}); err != nil {
			return err
		}
		if _, err := tx.CreateRun(ctx, services.NewRun{TimelineScope: "t", Source: "web", Announce: true}); err != nil {
			return err
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	if e := next(); e.Type != "delta" || e.ID != 4 {
		t.Fatalf("after the rollback %+v arrived; want the delta it had taken, sent again", e)
	}
	pub.Flush(ctx)
	for len(got) > 0 {
		if e := <-got; e.Type != "probe" {
			t.Fatalf("%+v arrived from a transaction rolled back", e)
		}
	}
}

// The answer's settlement is its transaction's last statement: it sends
// the events the transaction published before it (after those waiting for
// the sender), so the COMMIT holds none; one published after it goes with
// the COMMIT, after them.
func TestSettleBudgetSendsTheTransactionsEvents(t *testing.T) {
	ctx, pool, pub, got := listeningPairOn(t)
	store := repository.New(pool)
	repository.SetLinger(pub, 2*time.Second)
	before := repository.Sends(pub)
	if err := pub.Publish(ctx, services.Event{Type: "delta", TimelineScope: "t", ID: 1}); err != nil {
		t.Fatal(err)
	}
	err := store.Transact(ctx, func(tx services.Tx) error {
		for _, id := range []int64{2, 3} {
			if err := pub.PublishTx(ctx, tx, services.Event{Type: "message", TimelineScope: "t", ID: id}); err != nil {
				return err
			}
		}
		if _, err := tx.SettleBudget(ctx, "2026-11-26", "main", services.BudgetAmount{Tokens: 10}, services.BudgetAmount{Tokens: 7}); err != nil {
			return err
		}
		if n := repository.Unsent(tx); n != 0 {
			t.Errorf("after the settlement the transaction holds %d events for its COMMIT; want 0", n)
		}
		return pub.PublishTx(ctx, tx, services.Event{Type: "message", TimelineScope: "t", ID: 4})
	})
	if err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 4; want++ {
		select {
		case e := <-got:
			if e.Type == "probe" {
				want--
				continue
			}
			if e.ID != want {
				t.Fatalf("event %d arrived when %d was due", e.ID, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d did not come with the commit", want)
		}
	}
	if n := repository.Sends(pub) - before; n != 2 {
		t.Fatalf("the events took %d statements; want 2 (the settlement's, the COMMIT's)", n)
	}
}
