package schedule

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

type noQueue struct{ at []time.Time }

func (q *noQueue) EnqueueFireTx(_ context.Context, _ services.Tx, _ int64, at time.Time) error {
	q.at = append(q.at, at)
	return nil
}

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestRelativeAtAndLimits: "in 20m" is stored as the time it comes to;
// the active limit refuses one more; a paused one does not count, and
// resuming it is refused while the limit is reached.
func TestRelativeAtAndLimits(t *testing.T) {
	t.Parallel()
	store := dbtest.Store(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	q := &noQueue{}
	s := New(Options{Store: store, Queue: q, Location: time.UTC, Limits: Limits{MaxActive: 2}, Now: func() time.Time { return now }})
	ctx := context.Background()
	str := func(v string) *string { return &v }
	a, err := s.Create(ctx, "global", services.ScheduleRequest{Task: str("call Anna"), At: str("in 20m")})
	if err != nil {
		t.Fatal(err)
	}
	if !a.NextFireAt.Equal(now.Add(20*time.Minute)) || a.Spec != "2026-11-24T12:20:00Z" || a.Name != "call Anna" {
		t.Fatalf("relative at: %+v", a)
	}
	if _, err := s.Create(ctx, "global", services.ScheduleRequest{Task: str("x"), At: str("in soon")}); err == nil || !strings.Contains(err.Error(), `at "in soon"`) {
		t.Fatalf("bad relative at: %v", err)
	}
	b, err := s.Create(ctx, "global", services.ScheduleRequest{Task: str("check"), Every: str("1h")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "global", services.ScheduleRequest{Task: str("third"), Every: str("1h")}); !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := s.Create(ctx, "tg:7", services.ScheduleRequest{Task: str("another conversation"), Every: str("1h")}); err != nil {
		t.Fatalf("the limit is per conversation: %v", err)
	}
	paused, err := s.Update(ctx, "global", b.ID, b.Version, services.ScheduleRequest{State: str("paused")})
	if err != nil || paused.State != services.SchedulePaused || paused.NextFireAt != nil {
		t.Fatalf("pause: %+v %v", paused, err)
	}
	c, err := s.Create(ctx, "global", services.ScheduleRequest{Task: str("third"), Every: str("1h")})
	if err != nil {
		t.Fatalf("a paused one does not count: %v", err)
	}
	if _, err := s.Update(ctx, "global", b.ID, 0, services.ScheduleRequest{State: str("active")}); !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("resume over the limit: %v", err)
	}
	if _, err := s.Get(ctx, "tg:7", c.ID); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("another conversation's schedule: %v", err)
	}
	if len(q.at) != 4 {
		t.Fatalf("jobs enqueued: %v", q.at)
	}
}

// TestActiveLimitHoldsUnderConcurrentCreates: the count of active schedules
// and the insert are one decision, so 100 creates at once leave exactly the
// limit active and every other one is refused with the limit's error (it
// used to leave 24 active with the limit at 20).
func TestActiveLimitHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	dbtest.Reserve(t, 4+10) // Schema's pool and a pool of 10
	_, schema := dbtest.Schema(t)
	pool := dbtest.PoolFor(t, dbtest.SchemaURL(dbtest.URL(t), schema)+"&pool_max_conns=10")
	store := repository.New(pool)
	s := New(Options{Store: store, Queue: &syncQueue{}, Location: time.UTC, Limits: Limits{MaxActive: 20}})
	ctx := context.Background()
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := fmt.Sprintf("task %d", i)
			_, err := s.Create(ctx, "global", services.ScheduleRequest{Task: &task, Every: ptr("1h")})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	created := 0
	for err := range errs {
		switch {
		case err == nil:
			created++
		case services.IsKind(err, services.ECONFLICT) && strings.Contains(err.Error(), "active schedules, the limit"):
		default:
			t.Errorf("a create failed with something other than the limit: %v", err)
		}
	}
	all, err := store.ListSchedules(ctx, "global", false)
	if err != nil {
		t.Fatal(err)
	}
	if created != 20 || len(all) != 20 {
		t.Fatalf("%d creates succeeded and %d schedules are active; want exactly the limit, 20", created, len(all))
	}
}

func ptr(s string) *string { return &s }

// syncQueue is noQueue safe for concurrent use.
type syncQueue struct {
	mu sync.Mutex
	at []time.Time
}

func (q *syncQueue) EnqueueFireTx(_ context.Context, _ services.Tx, _ int64, at time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.at = append(q.at, at)
	return nil
}

type stubWatcher struct{}

func (stubWatcher) ValidateWatch(w services.Watch) error {
	if strings.Contains(w.URL, "bad") {
		return services.Errorf(services.EINVALID, "watch.url %q is bad", w.URL)
	}
	return nil
}

func (stubWatcher) ReadWatch(context.Context, services.Watch) (services.WatchContent, error) {
	return services.WatchContent{}, nil
}

func (stubWatcher) NormaliseWatch(services.Watch, string, string) (services.WatchContent, error) {
	return services.WatchContent{}, nil
}

// TestWatchLedger: a watch schedule is validated (and refused where
// nothing can watch); its ledger keeps the content the last fire that ran
// or found it unchanged judged (a failed fire leaves it, so the change is
// seen again), decides by the model's verdict rather than the wording,
// counts the fire times a late fire caught up, and forgets the content
// when the watch changes.
func TestWatchLedger(t *testing.T) {
	t.Parallel()
	store := dbtest.Store(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s := New(Options{Store: store, Queue: &noQueue{}, Location: time.UTC, Watcher: stubWatcher{}, Now: func() time.Time { return now }})
	ctx := context.Background()
	str := func(v string) *string { return &v }
	if _, err := New(Options{Store: store, Queue: &noQueue{}}).Create(ctx, "global", services.ScheduleRequest{Every: str("1h"),
		Watch: &services.Watch{URL: "https://example.org"}}); !services.IsKind(err, services.EUNAVAILABLE) {
		t.Fatalf("a watch without a watcher: %v", err)
	}
	if _, err := s.Create(ctx, "global", services.ScheduleRequest{Every: str("1h"), Watch: &services.Watch{URL: "https://bad.example"}}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("a bad watch: %v", err)
	}
	sc, err := s.Create(ctx, "global", services.ScheduleRequest{Every: str("1h"), Watch: &services.Watch{URL: " https://example.org/t "}})
	if err != nil || sc.Task != "Tell me what changed at https://example.org/t." || sc.Notify != services.NotifyOnChange || sc.Watch.URL != "https://example.org/t" {
		t.Fatalf("created: %+v %v", sc, err)
	}
	fire := func(r services.FireResult) (services.Schedule, services.ScheduleFire, services.FireDecision) {
		t.Helper()
		var out services.Schedule
		var f services.ScheduleFire
		var d services.FireDecision
		err := store.Transact(ctx, func(tx services.Tx) error {
			cur, err := tx.GetSchedule(ctx, sc.ID)
			if err != nil {
				return err
			}
			_, begun, err := s.BeginFireTx(ctx, tx, sc.ID, *cur.NextFireAt)
			if err != nil {
				return err
			}
			out, f, d, err = s.EndFireTx(ctx, tx, sc.ID, begun, r)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, f, d
	}
	now = now.Add(time.Hour)
	first := services.WatchContent{Text: "No tickets", Hash: "h1"}
	got, f, d := fire(services.FireResult{Status: services.FireOK, Answer: services.NothingNew, Watch: &first, Tokens: 900, ModelCalls: 1})
	if d.Notify || got.WatchHash != "h1" || got.WatchText != "No tickets" || f.ContentHash != "h1" || f.Tokens != 900 || f.ModelCalls != 1 {
		t.Fatalf("first look: %+v %+v %+v", got, f, d)
	}
	if r, _ := f.Receipt(); r != services.ReceiptRan {
		t.Fatalf("first look's receipt: %s", r)
	}
	now = now.Add(time.Hour)
	_, f, d = fire(services.FireResult{Status: services.FireUnchanged, Watch: &first})
	if r, why := f.Receipt(); d.Notify || r != services.ReceiptUnchanged || why != "" || f.Tokens != 0 {
		t.Fatalf("unchanged: %+v %+v", f, d)
	}
	// A failed fire leaves the content: the next one sees the change again.
	now = now.Add(time.Hour)
	second := services.WatchContent{Text: "Tickets!", Hash: "h2"}
	got, f, d = fire(services.FireResult{Status: services.FireError, Error: "model down", Watch: &second})
	if r, why := f.Receipt(); d.Notify || got.WatchHash != "h1" || r != services.ReceiptFailed || why != "model down" || got.Failures != 1 {
		t.Fatalf("failed: %+v %+v %s %s", got, d, r, why)
	}
	// A budget's refusal: skipped, with why; not a failure.
	now = now.Add(time.Hour)
	_, f, _ = fire(services.FireResult{Status: services.FireSkipped, Error: "skipped: budget (schedule tokens spent)", Watch: &second})
	if r, why := f.Receipt(); r != services.ReceiptSkipped || why != "budget (schedule tokens spent)" {
		t.Fatalf("skipped: %s %q", r, why)
	}
	// The same words as a message the owner got before still tell: the
	// content changed and the model said it is news.
	now = now.Add(time.Hour)
	got, _, d = fire(services.FireResult{Status: services.FireOK, Answer: "Tickets are out", News: true, Watch: &second})
	if !d.Notify || d.Message != "Tickets are out" || got.WatchHash != "h2" || got.LastNotified != "Tickets are out" {
		t.Fatalf("news: %+v %+v", got, d)
	}
	now = now.Add(time.Hour)
	third := services.WatchContent{Text: "Tickets!!", Hash: "h3"}
	if _, _, d = fire(services.FireResult{Status: services.FireOK, Answer: "Tickets are out", News: true, Watch: &third}); !d.Notify {
		t.Fatal("news with the last message's wording was not told")
	}
	now = now.Add(time.Hour)
	if _, _, d = fire(services.FireResult{Status: services.FireOK, Answer: "Layout changed", News: false, Watch: &third}); d.Notify {
		t.Fatal("a change the model judged not news was told")
	}
	// Down for 3½ hours past a fire's time: it runs once for the 3 it passed over.
	now = now.Add(4*time.Hour + 30*time.Minute)
	_, f, _ = fire(services.FireResult{Status: services.FireOK, Answer: services.NothingNew, Watch: &third})
	if r, _ := f.Receipt(); f.Missed != 3 || r != services.ReceiptCaughtUp {
		t.Fatalf("caught up: missed %d, receipt %s", f.Missed, r)
	}
	// A new watch starts from no content; an empty URL removes it.
	cur, _ := store.GetSchedule(ctx, sc.ID)
	up, err := s.Update(ctx, "global", sc.ID, cur.Version, services.ScheduleRequest{Watch: &services.Watch{URL: "https://example.org/other"}})
	if err != nil || up.WatchHash != "" || up.WatchText != "" || up.Watch.URL != "https://example.org/other" {
		t.Fatalf("new watch: %+v %v", up, err)
	}
	if up, err = s.Update(ctx, "global", sc.ID, up.Version, services.ScheduleRequest{Watch: &services.Watch{}}); err != nil || up.Watch != nil {
		t.Fatalf("watch removed: %+v %v", up, err)
	}
	if w, err := s.GetWithFires(ctx, "global", sc.ID, 3); err != nil || len(w.Fires) != 3 || w.Fires[0].Missed != 3 {
		t.Fatalf("with fires: %+v %v", w, err)
	}
}
