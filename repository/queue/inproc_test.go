package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// countingExec finishes each claimed run at once and counts executions.
type countingExec struct {
	store *repository.Store
	mu    sync.Mutex
	runs  map[int64]int
	// held says whether the caller gave the run's message.
	held map[int64]bool
}

func (e *countingExec) ExecuteClaimed(ctx context.Context, run services.Run, trigger *services.Message) error {
	e.mu.Lock()
	e.runs[run.ID]++
	e.held[run.ID] = trigger != nil && trigger.ID == run.TriggerMessageID
	e.mu.Unlock()
	_, err := e.store.FinishRun(ctx, run.ID, services.RunFinish{Status: services.RunOK})
	return err
}

func (e *countingExec) InterruptRun(ctx context.Context, run services.Run) error {
	_, err := e.store.FinishRun(ctx, run.ID, services.RunFinish{Status: services.RunInterrupted})
	return err
}

func (e *countingExec) count(id int64) (int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[id], e.held[id]
}

// TestRunStartedInProcessIsNotRunAgainByItsJob: a run committed through
// StartRunTx starts in the process at once (with the message it was given,
// not read again) and its job, inserted to wait as the fallback, is
// completed by the claim. Made available anyway (as if the fallback
// fired), the job finds nothing to do: the run is executed once.
func TestRunStartedInProcessIsNotRunAgainByItsJob(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	store := repository.New(pool)
	exec := &countingExec{store: store, runs: map[int64]int{}, held: map[int64]bool{}}
	q := startRunQueue(t, pool, store, exec, 2)

	var run services.Run
	var msg services.Message
	var start func(context.Context, services.Message)
	err := store.Transact(t.Context(), func(tx services.Tx) error {
		var err error
		if msg, _, err = tx.InsertMessage(t.Context(), services.NewMessage{TimelineScope: "global", Role: services.RoleUser,
			Source: services.SourceWeb, Content: "hello", Visible: true}); err != nil {
			return err
		}
		if run, err = tx.CreateRun(t.Context(), services.NewRun{TimelineScope: "global", TriggerMessageID: msg.ID, Source: "web"}); err != nil {
			return err
		}
		start, err = q.StartRunTx(t.Context(), tx, run)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if start == nil {
		t.Fatal("a started queue with free workers did not offer to start the run in-process")
	}
	var state string
	jobState(t, pool, &state, `SELECT state::text FROM river_job WHERE kind = 'agent_turn' AND (args->>'run_id')::bigint = $1`, run.ID)
	if state != "scheduled" {
		t.Fatalf("the fallback job is %s; want scheduled (it waits for the in-process start)", state)
	}
	start(t.Context(), msg)
	if !poll(15*time.Second, func() bool { n, _ := exec.count(run.ID); return n > 0 }) {
		t.Fatal("the run did not start in-process")
	}
	if _, held := exec.count(run.ID); !held {
		t.Error("the in-process start did not hand the run its message")
	}
	jobState(t, pool, &state, `SELECT state::text FROM river_job WHERE kind = 'agent_turn' AND (args->>'run_id')::bigint = $1`, run.ID)
	if state != "completed" {
		t.Fatalf("after the in-process claim the job is %s; want completed", state)
	}
	// The fallback fires anyway: it must find nothing to do.
	dbtest.Exec(t, pool, `UPDATE river_job SET state = 'available', scheduled_at = now(), finalized_at = NULL
		WHERE kind = 'agent_turn' AND (args->>'run_id')::bigint = $1`, run.ID)
	if !poll(15*time.Second, func() bool {
		jobState(t, pool, &state, `SELECT state::text FROM river_job WHERE kind = 'agent_turn' AND (args->>'run_id')::bigint = $1`, run.ID)
		return state == "completed"
	}) {
		t.Fatalf("the job the fallback ran is %s; want completed", state)
	}
	if n, _ := exec.count(run.ID); n != 1 {
		t.Fatalf("the run was executed %d times; want once", n)
	}
	got, err := store.GetRun(t.Context(), run.ID)
	if err != nil || got.Status != services.RunOK {
		t.Fatalf("run: %+v %v; want ok", got, err)
	}
}

func jobState(t *testing.T, pool *pgxpool.Pool, state *string, q string, args ...any) {
	t.Helper()
	if err := pool.QueryRow(t.Context(), q, args...).Scan(state); err != nil {
		t.Fatal(err)
	}
}

// claimCounter counts the store's claims by kind.
type claimCounter struct {
	*repository.Store
	mu                        sync.Mutex
	plain, locking, releasing int
}

func (c *claimCounter) ClaimNextRun(ctx context.Context, timeline string) (services.Run, []services.Run, error) {
	c.mu.Lock()
	c.plain++
	c.mu.Unlock()
	return c.Store.ClaimNextRun(ctx, timeline)
}

func (c *claimCounter) ClaimNextRunLocking(ctx context.Context, conn *pgxpool.Conn, timeline string, key int32) (services.Run, bool, error) {
	c.mu.Lock()
	c.locking++
	c.mu.Unlock()
	return c.Store.ClaimNextRunLocking(ctx, conn, timeline, key)
}

func (c *claimCounter) ClaimNextRunReleasing(ctx context.Context, conn *pgxpool.Conn, timeline string, key int32) (services.Run, []services.Run, bool, error) {
	c.mu.Lock()
	c.releasing++
	c.mu.Unlock()
	return c.Store.ClaimNextRunReleasing(ctx, conn, timeline, key)
}

// TestDrainTakesTheLockWithItsFirstClaim: a drain of one queued run costs
// two statements on the lock's session: the first claim, which takes the
// timeline's lock, and the last, empty one, which lets go of it.
func TestDrainTakesTheLockWithItsFirstClaim(t *testing.T) {
	t.Parallel()
	pool, schema := dbtest.Schema(t)
	store := repository.New(pool)
	counter := &claimCounter{Store: store}
	exec := &countingExec{store: store, runs: map[int64]int{}, held: map[int64]bool{}}
	q := startRunQueue(t, pool, counter, exec, 1)

	var run services.Run
	var start func(context.Context, services.Message)
	err := store.Transact(t.Context(), func(tx services.Tx) error {
		var err error
		if run, err = tx.CreateRun(t.Context(), services.NewRun{TimelineScope: "global", Source: "web"}); err != nil {
			return err
		}
		start, err = q.StartRunTx(t.Context(), tx, run)
		return err
	})
	if err != nil || start == nil {
		t.Fatalf("start: %v (start %v)", err, start != nil)
	}
	start(t.Context(), services.Message{})
	unlocked := func() bool {
		var held bool
		_ = pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND classid = 7302 AND objsubid = 2 AND objid = hashtext($1 || '/global')::oid)`, schema).Scan(&held)
		return !held
	}
	if !poll(15*time.Second, func() bool { n, _ := exec.count(run.ID); return n > 0 && unlocked() }) {
		t.Fatal("the run was not executed, or its timeline's lock not let go")
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if counter.locking != 1 || counter.releasing != 1 || counter.plain != 0 {
		t.Fatalf("claims: %d locking, %d releasing, %d plain; want 1, 1, 0", counter.locking, counter.releasing, counter.plain)
	}
	if n, _ := exec.count(run.ID); n != 1 {
		t.Fatalf("the run was executed %d times; want once", n)
	}
}
