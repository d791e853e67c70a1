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

func (q *noQueue) EnqueueFireTx(_ context.Context, _ services.Store, _ int64, at time.Time) error {
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

func (q *syncQueue) EnqueueFireTx(_ context.Context, _ services.Store, _ int64, at time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.at = append(q.at, at)
	return nil
}
