package repository_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

func TestRunLifecycleAndSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	trigger, _, err := s.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "go", Visible: true})
	if err != nil {
		t.Fatal(err)
	}
	parent, err := s.CreateRun(ctx, services.NewRun{Source: "web", Model: "m", TriggerMessageID: trigger.ID})
	if err != nil {
		t.Fatal(err)
	}
	if parent.Status != services.RunQueued || parent.TimelineScope != "global" || parent.ContextScope != "main" || parent.ParentRunID != 0 {
		t.Fatalf("defaults: %+v", parent)
	}
	child, err := s.CreateRun(ctx, services.NewRun{Source: "agent", ParentRunID: parent.ID, AgentID: "researcher", ContextScope: "sub:researcher:x", Status: services.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	if child.ParentRunID != parent.ID || child.AgentID != "researcher" {
		t.Fatalf("child: %+v", child)
	}
	for i, kind := range []services.StepKind{services.StepModelCall, services.StepToolCall, services.StepToolResult} {
		st, err := s.AppendStep(ctx, parent.ID, kind, json.RawMessage(`{"i":`+string(rune('0'+i))+`}`))
		if err != nil || st.Index != i {
			t.Fatalf("step %d: index=%d err=%v", i, st.Index, err)
		}
	}
	steps, err := s.ListSteps(ctx, parent.ID)
	if err != nil || len(steps) != 3 || steps[2].Kind != services.StepToolResult {
		t.Fatalf("steps: %+v %v", steps, err)
	}
	done, err := s.FinishRun(ctx, parent.ID, services.RunFinish{Status: services.RunOK, PromptTokenBudget: 1000, EstimatedPromptTokens: 300, ModelContextWindow: 8000, PromptTokens: 310, CachedTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	if done.FinishedAt == nil || done.PromptTokenBudget != 1000 || done.EstimatedPromptTokens != 300 || done.CachedTokens != 100 {
		t.Fatalf("finish: %+v", done)
	}
	if _, err := s.FinishRun(ctx, parent.ID, services.RunFinish{Status: services.RunError}); !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("second finish: want ECONFLICT, got %v", err)
	}
	if _, err := s.FinishRun(ctx, 424242, services.RunFinish{Status: services.RunError}); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("finish missing: want ENOTFOUND, got %v", err)
	}
	kids, err := s.ListRuns(ctx, services.RunQuery{ParentRunID: parent.ID})
	if err != nil || len(kids) != 1 || kids[0].ID != child.ID {
		t.Fatalf("children: %+v %v", kids, err)
	}
	byScope, err := s.ListRuns(ctx, services.RunQuery{ContextScope: "main"})
	if err != nil || len(byScope) != 1 || byScope[0].ID != parent.ID {
		t.Fatalf("by scope: %+v %v", byScope, err)
	}
}

func TestTransactRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	boom := errors.New("boom")
	var id int64
	err := s.Transact(ctx, func(tx services.Tx) error {
		m, _, err := tx.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "x", Visible: true})
		id = m.ID
		if err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("want boom, got %v", err)
	}
	if _, err := s.GetMessage(ctx, id); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("rolled back row is visible: %v", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.Transact(ctx, func(tx services.Tx) error {
			m, _, _ := tx.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "y"})
			id = m.ID
			panic("handler panic")
		})
	}()
	if _, err := s.GetMessage(ctx, id); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("row from panicking tx is visible: %v", err)
	}
}

func TestAppendStepConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	run, err := s.CreateRun(ctx, services.NewRun{Source: "web"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200 // a response with 100 parallel tool calls appends 200
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := s.AppendStep(ctx, run.ID, services.StepToolResult, nil)
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	steps, _ := s.ListSteps(ctx, run.ID)
	if len(steps) != n {
		t.Fatalf("%d steps, want %d", len(steps), n)
	}
	for i, st := range steps {
		if st.Index != i {
			t.Fatalf("indexes not dense: %d at %d", st.Index, i)
		}
	}
}

// StartRun starts a queued run once; a second worker gets the run as it
// is and does not start it again.
func TestStartRunStartsAQueuedRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	run, err := s.CreateRun(ctx, services.NewRun{Source: "web"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.StartRun(ctx, run.ID)
	if err != nil || !ok || got.Status != services.RunRunning || got.ID != run.ID {
		t.Fatalf("first StartRun = %+v, %v, %v; want the run, running", got, ok, err)
	}
	got, ok, err = s.StartRun(ctx, run.ID)
	if err != nil || ok || got.Status != services.RunRunning {
		t.Fatalf("second StartRun = %+v, %v, %v; want not started, still running", got, ok, err)
	}
	if _, err := s.FinishRun(ctx, run.ID, services.RunFinish{Status: services.RunOK}); err != nil {
		t.Fatal(err)
	}
	if got, ok, err = s.StartRun(ctx, run.ID); err != nil || ok || got.Status != services.RunOK {
		t.Fatalf("StartRun of a finished run = %+v, %v, %v", got, ok, err)
	}
	if _, _, err := s.StartRun(ctx, run.ID+1000); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("StartRun of a missing run: err = %v, want ENOTFOUND", err)
	}
}

// ClaimNextRun starts a timeline's queued main runs oldest first, once
// each; while a main run of the timeline is still running (its worker
// died: the caller holds the lock) it starts nothing and returns that run.
func TestClaimNextRunInOrderAfterOrphans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	var runs []services.Run
	for range 3 {
		r, err := s.CreateRun(ctx, services.NewRun{TimelineScope: "tl-claim", Source: "web"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if _, ok, err := s.StartRun(ctx, runs[0].ID); err != nil || !ok {
		t.Fatalf("start the first run: %v %v", ok, err)
	}
	got, orphans, err := s.ClaimNextRun(ctx, "tl-claim")
	if err != nil || got.ID != 0 || len(orphans) != 1 || orphans[0].ID != runs[0].ID {
		t.Fatalf("claim with a run still running = %+v, %+v, %v; want nothing claimed and that run as the orphan", got, orphans, err)
	}
	if _, err := s.FinishRun(ctx, runs[0].ID, services.RunFinish{Status: services.RunInterrupted}); err != nil {
		t.Fatal(err)
	}
	for _, want := range runs[1:] {
		got, orphans, err := s.ClaimNextRun(ctx, "tl-claim")
		if err != nil || got.ID != want.ID || got.Status != services.RunRunning || len(orphans) != 0 {
			t.Fatalf("claim = %+v, %+v, %v; want run %d running", got, orphans, err, want.ID)
		}
		if _, err := s.FinishRun(ctx, got.ID, services.RunFinish{Status: services.RunOK}); err != nil {
			t.Fatal(err)
		}
	}
	if got, orphans, err := s.ClaimNextRun(ctx, "tl-claim"); err != nil || got.ID != 0 || len(orphans) != 0 {
		t.Fatalf("claim with nothing queued = %+v, %+v, %v; want nothing", got, orphans, err)
	}
}

// A drain claims on the session holding its timeline's lock, and its last
// claim, which finds nothing, lets go of the lock in the same statement:
// while a run was claimed (or an orphan found) another session cannot take
// the lock, after the empty claim it can.
func TestClaimNextRunReleasingLetsGoOfTheLockWhenNothingIsLeft(t *testing.T) {
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	s := repository.New(pool)
	const key = 7302
	lockSQL := `SELECT pg_try_advisory_lock($1, hashtext(current_schema() || '/' || $2))`
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	other, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	var got bool
	if err := holder.QueryRow(ctx, lockSQL, key, "tl-release").Scan(&got); err != nil || !got {
		t.Fatalf("take the lock: %v %v", got, err)
	}
	run, err := s.CreateRun(ctx, services.NewRun{TimelineScope: "tl-release", Source: "web"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, orphans, released, err := s.ClaimNextRunReleasing(ctx, holder, "tl-release", key)
	if err != nil || claimed.ID != run.ID || len(orphans) != 0 || released {
		t.Fatalf("claim = %+v, %+v, released %v, %v; want run %d claimed and the lock kept", claimed, orphans, released, err, run.ID)
	}
	if err := other.QueryRow(ctx, lockSQL, key, "tl-release").Scan(&got); err != nil || got {
		t.Fatalf("another session took the lock after a claim: %v %v", got, err)
	}
	// Still running: it is an orphan for the next claim, which keeps the lock.
	if _, orphans, released, err = s.ClaimNextRunReleasing(ctx, holder, "tl-release", key); err != nil || len(orphans) != 1 || released {
		t.Fatalf("claim with an orphan = %+v, released %v, %v; want the orphan and the lock kept", orphans, released, err)
	}
	if _, err := s.FinishRun(ctx, run.ID, services.RunFinish{Status: services.RunOK}); err != nil {
		t.Fatal(err)
	}
	claimed, orphans, released, err = s.ClaimNextRunReleasing(ctx, holder, "tl-release", key)
	if err != nil || claimed.ID != 0 || len(orphans) != 0 || !released {
		t.Fatalf("claim with nothing left = %+v, %+v, released %v, %v; want nothing and the lock let go", claimed, orphans, released, err)
	}
	if err := other.QueryRow(ctx, lockSQL, key, "tl-release").Scan(&got); err != nil || !got {
		t.Fatalf("another session could not take the lock after the empty claim: %v %v", got, err)
	}
}

// MainRunTimelines (what the reaper and a starting instance look at) lists
// each timeline with a main run in the status once, the longest-waiting
// first, leaving out sub-agent and schedule runs; a timeline with more
// queued runs than the limit does not hide the others.
func TestMainRunTimelinesListsEachTimelineOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	create := func(r services.NewRun) services.Run {
		t.Helper()
		r.Source = "web"
		run, err := s.CreateRun(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	parent := create(services.NewRun{TimelineScope: "tl-parent", Status: services.RunRunning})
	create(services.NewRun{TimelineScope: "tl-child", ParentRunID: parent.ID, AgentID: "coder"})
	create(services.NewRun{TimelineScope: "tl-fire", AgentID: services.ScheduleAgent})
	create(services.NewRun{TimelineScope: "tl-quiet"})
	for range 3 {
		create(services.NewRun{TimelineScope: "tl-busy"})
	}
	got, err := s.MainRunTimelines(ctx, services.RunQueued, 2)
	if err != nil || strings.Join(got, ",") != "tl-quiet,tl-busy" {
		t.Fatalf("queued: %q, %v; want tl-quiet,tl-busy", got, err)
	}
	got, err = s.MainRunTimelines(ctx, services.RunRunning, 10)
	if err != nil || strings.Join(got, ",") != "tl-parent" {
		t.Fatalf("running: %q, %v; want tl-parent", got, err)
	}
}

// A drain's first claim takes the timeline's lock in its own statement:
// held by another session, it claims and completes nothing; free, it takes
// the lock (kept after the statement) and claims the queued run; with an
// orphan it takes the lock but returns nothing (its snapshot predates the
// lock, so the caller claims again).
func TestClaimNextRunLockingTakesTheLockInTheClaim(t *testing.T) {
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	s := repository.New(pool)
	const key = 7302
	lockSQL := `SELECT pg_try_advisory_lock($1, hashtext(current_schema() || '/' || $2))`
	unlockSQL := `SELECT pg_advisory_unlock($1, hashtext(current_schema() || '/' || $2))`
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	other, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	var got bool
	if err := other.QueryRow(ctx, lockSQL, key, "tl-lock").Scan(&got); err != nil || !got {
		t.Fatalf("take the lock: %v %v", got, err)
	}
	run, err := s.CreateRun(ctx, services.NewRun{TimelineScope: "tl-lock", Source: "web"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, locked, err := s.ClaimNextRunLocking(ctx, holder, "tl-lock", key)
	if err != nil || locked || claimed.ID != 0 {
		t.Fatalf("claim while another session holds the lock = %+v, locked %v, %v; want nothing", claimed, locked, err)
	}
	if cur, err := s.GetRun(ctx, run.ID); err != nil || cur.Status != services.RunQueued {
		t.Fatalf("run after the busy claim: %+v %v; want queued", cur, err)
	}
	if err := other.QueryRow(ctx, unlockSQL, key, "tl-lock").Scan(&got); err != nil || !got {
		t.Fatalf("let go of the lock: %v %v", got, err)
	}
	claimed, locked, err = s.ClaimNextRunLocking(ctx, holder, "tl-lock", key)
	if err != nil || !locked || claimed.ID != run.ID || claimed.Status != services.RunRunning {
		t.Fatalf("claim with the lock free = %+v, locked %v, %v; want run %d claimed and the lock taken", claimed, locked, err, run.ID)
	}
	if err := other.QueryRow(ctx, lockSQL, key, "tl-lock").Scan(&got); err != nil || got {
		t.Fatalf("another session took the lock after the locking claim: %v %v", got, err)
	}
	// The claimed run, still running, is an orphan once the lock is let go
	// and taken again: the locking claim takes the lock and returns nothing.
	if err := holder.QueryRow(ctx, unlockSQL, key, "tl-lock").Scan(&got); err != nil || !got {
		t.Fatalf("let go of the lock: %v %v", got, err)
	}
	if _, err := s.CreateRun(ctx, services.NewRun{TimelineScope: "tl-lock", Source: "web"}); err != nil {
		t.Fatal(err)
	}
	claimed, locked, err = s.ClaimNextRunLocking(ctx, holder, "tl-lock", key)
	if err != nil || !locked || claimed.ID != 0 {
		t.Fatalf("claim with an orphan = %+v, locked %v, %v; want the lock taken and nothing claimed", claimed, locked, err)
	}
	if _, orphans, released, err := s.ClaimNextRunReleasing(ctx, holder, "tl-lock", key); err != nil || len(orphans) != 1 || orphans[0].ID != run.ID || released {
		t.Fatalf("claim after it = %+v, released %v, %v; want the orphan, the lock kept", orphans, released, err)
	}
}
