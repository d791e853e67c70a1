package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// An outbound delivery is unique by its channel and key, whatever its
// payload: a second notice with the same key (a pairing reply for the same
// code, triggered by another message) schedules nothing.
func TestOutboundIsUniqueByKey(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	enq, err := queue.NewEnqueuer(context.Background(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, payload := range []string{`{"reply_to_message_id":10}`, `{"reply_to_message_id":11}`, `{"reply_to_message_id":12}`} {
		if err := enq.EnqueueOutbound(t.Context(), services.Outbound{Channel: services.SourceTelegram, Key: "pairing:9:ABC234", Payload: json.RawMessage(payload)}); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
	if err := enq.EnqueueOutbound(t.Context(), services.Outbound{Channel: services.SourceTelegram, Key: "reply:5", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'outbound' AND args->>'key' = 'pairing:9:ABC234'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var all int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'outbound'`).Scan(&all); err != nil {
		t.Fatal(err)
	}
	if n != 1 || all != 2 {
		t.Fatalf("outbound jobs: %d with the repeated key, %d in all; want 1 and 2", n, all)
	}
}

// recorder is an outbound handler that records what it delivered and can
// be told to refuse a payload for a while.
type recorder struct {
	mu   sync.Mutex
	got  []string
	fail func(payload string, n int) error
	seen map[string]int
}

func (r *recorder) handle(_ context.Context, payload json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := string(payload)
	r.seen[p]++
	if r.fail != nil {
		if err := r.fail(p, r.seen[p]); err != nil {
			return err
		}
	}
	r.got = append(r.got, p)
	return nil
}

func (r *recorder) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func startQueue(t *testing.T, pool *pgxpool.Pool, r *recorder) *queue.Queue {
	t.Helper()
	q, err := queue.New(t.Context(), pool, repository.New(pool), nil, queue.Options{TurnWorkers: -1, PollInterval: 50 * time.Millisecond,
		Outbound: map[services.Source]services.OutboundHandler{services.SourceTelegram: r.handle}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = q.Stop(sctx)
		cancel()
	})
	return q
}

func waitDelivered(t *testing.T, r *recorder, n int) []string {
	t.Helper()
	if !poll(15*time.Second, func() bool { return len(r.delivered()) >= n }) {
		t.Fatalf("delivered %v; want %d deliveries", r.delivered(), n)
	}
	return r.delivered()
}

// TestLaneKeepsOrderThroughRetries: deliveries of one lane go out in the
// order they were scheduled even when the first one is refused for a while
// (a 429 window, then a failed call retried with backoff); no job of the
// lane calls the channel again before the 429's retry_after is over;
// another lane is not held up meanwhile.
func TestLaneKeepsOrderThroughRetries(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	var calls []time.Time
	r := &recorder{seen: map[string]int{}, fail: func(p string, n int) error {
		if p == `"a1"` {
			calls = append(calls, time.Now())
		}
		switch {
		case p == `"a1"` && n == 1:
			return &services.RetryAfterError{Delay: time.Second}
		case p == `"a1"` && n == 2:
			return errors.New("connection reset")
		}
		return nil
	}}
	q := startQueue(t, pool, r)
	for _, d := range []struct{ key, lane, payload string }{
		{"a1", "chat:1", `"a1"`}, {"a2", "chat:1", `"a2"`}, {"b1", "chat:2", `"b1"`}, {"a3", "chat:1", `"a3"`},
	} {
		if err := q.EnqueueOutbound(t.Context(), services.Outbound{Channel: services.SourceTelegram, Key: d.key, Lane: d.lane, Payload: json.RawMessage(d.payload)}); err != nil {
			t.Fatal(err)
		}
	}
	got := waitDelivered(t, r, 4)
	if got[0] != `"b1"` {
		t.Errorf("the other lane waited for chat 1's refused delivery: %v", got)
	}
	var lane1 []string
	for _, p := range got {
		if p != `"b1"` {
			lane1 = append(lane1, p)
		}
	}
	if strings.Join(lane1, ",") != `"a1","a2","a3"` {
		t.Fatalf("chat 1 got %v; want a1, a2, a3 in order", lane1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(calls) != 3 || calls[1].Sub(calls[0]) < 950*time.Millisecond {
		t.Fatalf("a1 was called %d times, the second time %s after a 429 asking for 1 s", len(calls), calls[1].Sub(calls[0]))
	}
}

// TestLaneOfADeadWorkerResumesAtStart: a delivery whose worker died (its
// job still 'running', as after kill -9) is sent as soon as a queue starts,
// not at River's stuck-job rescue.
func TestLaneOfADeadWorkerResumesAtStart(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	enq, err := queue.NewEnqueuer(t.Context(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := enq.EnqueueOutbound(t.Context(), services.Outbound{Channel: services.SourceTelegram, Key: "reply:1", Lane: "chat:1", Payload: json.RawMessage(`"x"`)}); err != nil {
		t.Fatal(err)
	}
	dbtest.Exec(t, pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE kind = 'outbound'`)
	r := &recorder{seen: map[string]int{}}
	started := time.Now()
	startQueue(t, pool, r)
	waitDelivered(t, r, 1)
	if d := time.Since(started); d > 5*time.Second {
		t.Fatalf("the delivery of a dead worker went out %s after start", d)
	}
}
