package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
)

// blockingExec holds a claimed run until released, like a
// model call in flight; InterruptRun records what a reaper closed.
type blockingExec struct {
	store       *repository.Store
	started     chan int64
	release     chan struct{}
	interrupted chan int64
}

func (e *blockingExec) ExecuteClaimed(ctx context.Context, run services.Run, _ *services.Message) error {
	e.started <- run.ID
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	_, err := e.store.FinishRun(context.WithoutCancel(ctx), run.ID, services.RunFinish{Status: services.RunOK})
	return err
}

func (e *blockingExec) InterruptRun(ctx context.Context, run services.Run) error {
	e.interrupted <- run.ID
	_, err := e.store.FinishRun(ctx, run.ID, services.RunFinish{Status: services.RunInterrupted})
	return err
}

// startRunQueue starts a queue on pool with workers turn workers, polling
// every 50 ms and reaping only when a test asks; at the test's end its
// context is cancelled and it is stopped.
func startRunQueue(t *testing.T, pool *pgxpool.Pool, store services.Store, exec services.RunExecutor, workers int) *queue.Queue {
	t.Helper()
	q, err := queue.New(t.Context(), pool, store, exec, queue.Options{TurnWorkers: workers, PollInterval: 50 * time.Millisecond, ReapEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := q.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = q.Stop(sctx)
	})
	t.Cleanup(cancel) // first: the queue's context ends, then it stops
	return q
}

// TestRunKeepsItsLockWhenTheLockConnectionDies: the connection holding a
// timeline's lock dies while its run is in flight on a live worker (what a
// PostgreSQL failover does to every session). The worker takes the lock
// again on a new connection, so a reaper finds the timeline held and leaves
// the run alone; the run ends ok, never interrupted.
func TestRunKeepsItsLockWhenTheLockConnectionDies(t *testing.T) {
	t.Parallel()
	pool, schema := dbtest.Schema(t)
	store := repository.New(pool)
	exec := &blockingExec{store: store, started: make(chan int64, 1), release: make(chan struct{}), interrupted: make(chan int64, 4)}
	q := startRunQueue(t, pool, store, exec, 1)

	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	run, err := repository.NewTx(tx).CreateRun(t.Context(), services.NewRun{TimelineScope: "global", ContextScope: "main", Source: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueRunTx(t.Context(), repository.NewTx(tx), run); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exec.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not start")
	}

	holder := func() (pid int32) {
		_ = pool.QueryRow(t.Context(), `SELECT COALESCE(max(pid), 0) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND classid = 7302 AND objsubid = 2 AND objid = hashtext($1 || '/global')::oid`, schema).Scan(&pid)
		return pid
	}
	first := holder()
	if first == 0 {
		t.Fatal("nobody holds the timeline's lock while its run is in flight")
	}
	dbtest.Exec(t, pool, `SELECT pg_terminate_backend($1, 5000)`, first)
	var p int32
	if !poll(20*time.Second, func() bool { p = holder(); return p != 0 && p != first }) {
		t.Fatalf("the lock was not taken again after its connection died (holder %d)", p)
	}
	q.Reap(t.Context())
	select {
	case id := <-exec.interrupted:
		t.Fatalf("the reaper interrupted run %d while its worker was alive", id)
	default:
	}
	close(exec.release)
	var got services.Run
	poll(20*time.Second, func() bool {
		got, err = store.GetRun(t.Context(), run.ID)
		return err != nil || got.Status != services.RunRunning
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != services.RunOK {
		t.Fatalf("run ended %s", got.Status)
	}
}
