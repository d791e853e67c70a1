// Package queue runs Switchboard's durable work on River, a PostgreSQL job
// queue: agent turns and outbound channel deliveries. Several instances
// share the work through the same tables; a job whose process died is
// retried by another.
//
// Jobs are inserted in the caller's transaction (Enqueuer): a run's job
// commits with the run row, a reply's delivery with the reply.
//
// Agent turns are serialised per timeline with a session advisory lock held
// by the worker's connection: a job for a busy timeline ends at once, and
// whichever job holds the lock drains the timeline's queued runs in id
// order, so messages sent mid-run are answered in order and none is dropped.
// A lock held means a live worker: a run still 'running' whose timeline lock
// can be taken has lost its worker, and is closed as interrupted (Reap).
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/services"
)

const (
	queueTurns    = "agent_turns"
	queueOutbound = "outbound"
	// runLockKey is the first key of the per-timeline run lock.
	runLockKey = 7302
	// laneLockKey is the first key of the per-lane delivery lock.
	laneLockKey = 7303
)

// OutboundWorkers is how many lanes (chats) one instance delivers to at
// once. Each holds a connection for its lane's lock while its queries use
// another (app.ServePoolSize counts them).
const OutboundWorkers = 8

// Options configures the queue.
type Options struct {
	Logger *slog.Logger
	// TurnWorkers is how many timelines this instance serves at once.
	TurnWorkers int
	// RunTimeout bounds one run; jobs running longer than it (plus a margin)
	// are considered stuck and retried elsewhere.
	RunTimeout time.Duration
	// ReapEvery is how often runs of dead workers are looked for.
	ReapEvery time.Duration
	// PollInterval is River's fallback poll (LISTEN/NOTIFY wakes it sooner).
	PollInterval time.Duration
	// Outbound delivers the payloads of each channel (e.g. "telegram").
	Outbound map[services.Source]services.OutboundHandler
	// Fires runs schedules' fires (nil: this instance runs none).
	Fires services.FireExecutor
	// Compactions runs compaction jobs (nil: this instance runs none).
	Compactions services.CompactionExecutor
	// Starts are other Enqueuers (the app's, built before the runtime)
	// whose StartRunTx starts runs in this queue once it is started; its
	// own always does.
	Starts []*Enqueuer
}

// Queue is the River client with Switchboard's workers.
type Queue struct {
	*Enqueuer
	pool     *pgxpool.Pool
	store    services.Store
	exec     services.RunExecutor
	log      *slog.Logger
	opts     Options
	handlers map[services.Source]services.OutboundHandler
	fires    services.FireExecutor
	// compactions runs compaction jobs.
	compactions services.CompactionExecutor
	// local runs turns in this process (inproc.go).
	local localTurns
}

// Enqueuer inserts jobs, in the caller's transaction when it has one. It
// works no jobs itself, so the agent runtime can be built with it before the
// Queue that executes its runs.
type Enqueuer struct {
	client *river.Client[pgx.Tx]
	pool   *pgxpool.Pool
	// local is the started Queue that starts runs in this process
	// (StartRunTx); nil: none, jobs run them.
	local atomic.Pointer[Queue]
}

var (
	_ services.RunQueue      = (*Enqueuer)(nil)
	_ services.OutboundQueue = (*Enqueuer)(nil)
)

// TurnArgs is the job of one queued run: it drains the run's timeline.
type TurnArgs struct {
	RunID    int64  `json:"run_id"`
	Timeline string `json:"timeline"`
	// After is set on the job the reaper gives a timeline after closing
	// run After, whose worker died: the dead worker's job cannot drain.
	After int64 `json:"after,omitempty"`
}

// Kind implements river.JobArgs.
func (TurnArgs) Kind() string { return "agent_turn" }

// liveStates are the job states a new job is deduplicated against: a job
// waiting or running. A completed job does not count, so a run whose job
// ended (e.g. finding its timeline busy) can be handed to a new one.
var liveStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

func turnOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: queueTurns, MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}}
}

func riverConfig(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*river.Config, error) {
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("queue: read schema: %w", err)
	}
	if schema == "public" {
		schema = ""
	}
	return &river.Config{
		Logger: log.With("component", "river"),
		Schema: schema,
		// River notifies workers of an insert at most once per FetchCooldown
		// per queue; a longer cooldown leaves back-to-back turns waiting for
		// the poll.
		FetchCooldown: time.Millisecond,
	}, nil
}

// NewEnqueuer returns an insert-only client on pool.
func NewEnqueuer(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*Enqueuer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := riverConfig(ctx, pool, log)
	if err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	return &Enqueuer{client: client, pool: pool}, nil
}

// pgxTx is the pgx transaction under tx, River's own transaction type.
func pgxTx(tx services.Tx) (pgx.Tx, error) {
	if ptx, ok := tx.DriverTx().(pgx.Tx); ok {
		return ptx, nil
	}
	return nil, services.Errorf(services.EINTERNAL, "queue: the transaction is not a pgx transaction")
}

// EnqueueRunTx schedules a queued run in the caller's transaction; a job
// already waiting or running for the same run makes this a no-op.
func (e *Enqueuer) EnqueueRunTx(ctx context.Context, tx services.Tx, run services.Run) error {
	ptx, err := pgxTx(tx)
	if err != nil {
		return err
	}
	if _, err := e.client.InsertTx(ctx, ptx, TurnArgs{RunID: run.ID, Timeline: run.TimelineScope}, turnOpts()); err != nil {
		return &services.Error{Kind: services.EUNAVAILABLE, Message: "could not schedule the agent's answer", Err: err}
	}
	return nil
}

// New builds the queue; call Start to work jobs. With TurnWorkers < 0 this
// instance works no agent turns (another instance does).
func New(ctx context.Context, pool *pgxpool.Pool, store services.Store, exec services.RunExecutor, opts Options) (*Queue, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TurnWorkers == 0 {
		opts.TurnWorkers = 16
	}
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = 10 * time.Minute
	}
	if opts.ReapEvery <= 0 {
		opts.ReapEvery = 15 * time.Second
	}
	if opts.PollInterval <= 0 {
		// River's own default: turns start in the process that took the
		// message, and jobs inserted available wake the workers at once.
		opts.PollInterval = time.Second
	}
	q := &Queue{pool: pool, store: store, exec: exec, log: opts.Logger, opts: opts, handlers: map[services.Source]services.OutboundHandler{}, fires: opts.Fires, compactions: opts.Compactions}
	for ch, h := range opts.Outbound {
		q.handlers[ch] = h
	}
	cfg, err := riverConfig(ctx, pool, opts.Logger)
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &turnWorker{q: q})
	river.AddWorker(workers, &outboundWorker{q: q})
	river.AddWorker(workers, &fireWorker{q: q})
	river.AddWorker(workers, &compactWorker{q: q})
	cfg.FetchPollInterval = opts.PollInterval
	cfg.JobTimeout = opts.RunTimeout + time.Minute
	cfg.RescueStuckJobsAfter = opts.RunTimeout + 2*time.Minute
	cfg.Queues = map[string]river.QueueConfig{queueOutbound: {MaxWorkers: OutboundWorkers}}
	if opts.Fires != nil {
		cfg.Queues[queueSchedules] = river.QueueConfig{MaxWorkers: ScheduleWorkers}
	}
	if opts.Compactions != nil {
		cfg.Queues[queueCompaction] = river.QueueConfig{MaxWorkers: CompactionWorkers}
	}
	if opts.TurnWorkers > 0 {
		cfg.Queues[queueTurns] = river.QueueConfig{MaxWorkers: opts.TurnWorkers}
	}
	cfg.Workers = workers
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	q.Enqueuer = &Enqueuer{client: client, pool: pool}
	if opts.TurnWorkers > 0 {
		q.local.slots = make(chan struct{}, opts.TurnWorkers)
	}
	return q, nil
}

// Start works jobs and reaps runs of dead workers until ctx ends or Stop.
func (q *Queue) Start(ctx context.Context) error {
	if q.opts.TurnWorkers > 0 {
		// Runs left by a dead process are closed before Start returns, so
		// what happens next never races the first pass.
		q.Reap(ctx)
	}
	// Deliveries a dead process was sending resume now, not at River's
	// stuck-job rescue.
	q.reapLanes(ctx)
	q.reapFires(ctx)
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("queue: start: %w", err)
	}
	q.startLocal(ctx)
	if q.opts.TurnWorkers > 0 {
		q.startQueued(ctx)
	}
	go q.reapLoop(ctx)
	return nil
}

// Stop finishes jobs and in-process runs in flight (bounded by ctx; runs
// still in flight then are cut short and left to the reaper) and stops.
func (q *Queue) Stop(ctx context.Context) error {
	q.stopLocalIntake()
	err := q.client.Stop(ctx)
	q.waitLocal(ctx)
	return err
}

type turnWorker struct {
	river.WorkerDefaults[TurnArgs]
	q *Queue
}

func (w *turnWorker) Work(ctx context.Context, job *river.Job[TurnArgs]) error {
	// A turn worker's slot is shared with the runs started in-process, so
	// this instance drains at most TurnWorkers timelines at once.
	if slots := w.q.local.slots; slots != nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-slots }()
	}
	return w.q.drainTimeline(ctx, job.Args.Timeline)
}

// errBusy means another worker holds the timeline.
var errBusy = errors.New("timeline busy")

// withTimelineLock runs fn holding the timeline's run lock, or returns
// errBusy at once when another session holds it.
func (q *Queue) withTimelineLock(ctx context.Context, timeline string, fn func() error) error {
	return q.withLock(ctx, runLockKey, timeline, fn)
}

// drainHeld runs the timeline's queued runs holding its lock (runQueued);
// the last claim, which finds none, lets go of the lock.
// When the store can, the lock is taken by the first claim's statement
// (lockingClaimer), which costs no statement of its own.
func (q *Queue) drainHeld(ctx context.Context, timeline string, trigger func(services.Run) *services.Message) error {
	var first services.Run
	take := takeLock(ctx, runLockKey, timeline)
	if lc, ok := q.store.(lockingClaimer); ok {
		take = func(conn *pgxpool.Conn) (bool, error) {
			run, locked, err := lc.ClaimNextRunLocking(ctx, conn, timeline, runLockKey)
			first = run
			return locked, err
		}
	}
	return q.withHeldLockTaking(ctx, runLockKey, timeline, take, func(h *heldLock) error {
		return q.runQueued(ctx, timeline, trigger, h, first)
	})
}

// lockingClaimer takes the timeline's lock on conn and claims its next run
// in the same statement (repository.Store): locked false, the lock is held
// elsewhere; run.ID == 0, claim again (its snapshot predates the lock).
type lockingClaimer interface {
	ClaimNextRunLocking(ctx context.Context, conn *pgxpool.Conn, timelineScope string, lockKey int32) (run services.Run, locked bool, err error)
}

// releasingClaimer claims on the session holding the timeline's lock and
// lets go of it when nothing is left (repository.Store).
type releasingClaimer interface {
	ClaimNextRunReleasing(ctx context.Context, conn *pgxpool.Conn, timelineScope string, lockKey int32) (services.Run, []services.Run, bool, error)
}

// claim claims the timeline's next run: on h's connection, letting go of
// the lock when there is none, when the store can (h.released then says
// so), else as ClaimNextRun.
func (q *Queue) claim(ctx context.Context, timeline string, h *heldLock) (services.Run, []services.Run, error) {
	rc, ok := q.store.(releasingClaimer)
	if !ok || h == nil {
		return q.store.ClaimNextRun(ctx, timeline)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return q.store.ClaimNextRun(ctx, timeline)
	}
	run, orphans, released, err := rc.ClaimNextRunReleasing(ctx, h.conn, timeline, runLockKey)
	h.released = released
	return run, orphans, err
}

// withLock runs fn holding the session advisory lock (key, name), or
// returns errBusy at once when another session holds it.
//
// While fn runs, the lock's connection is pinged every lockCheckEvery.
// When that connection dies with fn still running on a live instance (a
// PostgreSQL failover or restart, a terminated backend), the lock went with
// it; it is taken again on a new connection as soon as the database
// answers, before another instance's reaper takes the free lock for a dead
// worker's and closes the work in hand. If another session took it first,
// the work is that session's to close (exactly once, as after a crash) and
// the lock is not asked for again.
func (q *Queue) withLock(ctx context.Context, key int32, name string, fn func() error) error {
	return q.withHeldLock(ctx, key, name, func(*heldLock) error { return fn() })
}

// withHeldLock is withLock giving fn the held lock: fn may let go of it
// with its last statement (heldLock.released).
func (q *Queue) withHeldLock(ctx context.Context, key int32, name string, fn func(h *heldLock) error) error {
	return q.withHeldLockTaking(ctx, key, name, takeLock(ctx, key, name), fn)
}

// takeLock takes the lock (key, name) on a connection, in a statement of
// its own: true when it got it.
func takeLock(ctx context.Context, key int32, name string) func(conn *pgxpool.Conn) (bool, error) {
	return func(conn *pgxpool.Conn) (got bool, err error) {
		err = conn.QueryRow(ctx, lockSQL, key, name).Scan(&got)
		return got, err
	}
}

// withHeldLockTaking is withHeldLock taking the lock with take, which may
// do more in the same statement; when take fails, the connection is
// closed, so a lock its statement took goes with its session.
func (q *Queue) withHeldLockTaking(ctx context.Context, key int32, name string, take func(conn *pgxpool.Conn) (bool, error), fn func(h *heldLock) error) error {
	conn, err := q.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	got, err := take(conn)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = conn.Conn().Close(cctx)
		cancel()
		conn.Release()
		return err
	}
	if !got {
		conn.Release()
		return errBusy
	}
	h := &heldLock{conn: conn}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		q.keepLock(ctx, h, key, name, stop)
	}()
	defer func() {
		close(stop)
		<-watched
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.conn == nil {
			return
		}
		if h.released {
			h.conn.Release()
			return
		}
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := h.conn.Exec(uctx, unlockSQL, key, name); err != nil {
			// The session may be broken; drop it so the lock goes with it.
			_ = h.conn.Conn().Close(uctx)
		}
		h.conn.Release()
	}()
	return fn(h)
}

const (
	lockSQL   = `SELECT pg_try_advisory_lock($1, hashtext(current_schema() || '/' || $2))`
	unlockSQL = `SELECT pg_advisory_unlock($1, hashtext(current_schema() || '/' || $2))`
)

// lockCheckEvery is how often a held lock's connection is pinged.
const lockCheckEvery = time.Second

// heldLock is the connection a lock is held on (nil: lost to another
// session).
type heldLock struct {
	mu   sync.Mutex
	conn *pgxpool.Conn
	// released: the holder let go of it (its last claim found nothing).
	released bool
}

// keepLock pings h's connection until stop; when the ping fails it takes the
// lock again on a new connection (retrying while the database does not
// answer), unless another session has taken it meanwhile.
func (q *Queue) keepLock(ctx context.Context, h *heldLock, key int32, name string, stop <-chan struct{}) {
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	lost := false
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		if h.released {
			h.mu.Unlock()
			return
		}
		if !lost {
			pctx, cancel := context.WithTimeout(ctx, lockCheckEvery)
			err := h.conn.Ping(pctx)
			cancel()
			if err == nil {
				h.mu.Unlock()
				continue
			}
			q.log.Warn("lock connection lost; taking the lock again", "lock", name, "err", err)
			_ = h.conn.Conn().Close(context.Background())
			h.conn.Release()
			h.conn, lost = nil, true
		}
		// Take it again on a new connection.
		actx, cancel := context.WithTimeout(ctx, lockCheckEvery)
		conn, err := q.pool.Acquire(actx)
		var got bool
		if err == nil {
			if err = conn.QueryRow(actx, lockSQL, key, name).Scan(&got); err != nil {
				conn.Release()
			}
		}
		cancel()
		switch {
		case err != nil:
			// The database does not answer yet: try again at the next tick.
		case got:
			h.conn, lost = conn, false
			q.log.Info("lock taken again", "lock", name)
		default:
			conn.Release()
			q.log.Warn("lock taken by another session meanwhile; its holder closes the work", "lock", name)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

// drainTimeline executes the timeline's queued runs in order, first closing
// runs left 'running' by a dead worker. When another worker holds the
// timeline, this job ends at once: that worker looks for queued runs again
// after it lets go of the lock, and this job's run was queued before the
// failed attempt, so it is found. (If that worker dies, the reaper
// hands the timeline's queued runs to a new job.) Snoozing instead would delay the answer by the
// scheduler's period.
func (q *Queue) drainTimeline(ctx context.Context, timeline string) error {
	for {
		err := q.drainHeld(ctx, timeline, nil)
		if errors.Is(err, errBusy) {
			return nil
		}
		if err != nil {
			return err
		}
		// A run queued after our last look, whose job found us busy.
		if _, err := q.store.NextQueuedRun(ctx, timeline); services.IsKind(err, services.ENOTFOUND) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// runQueued executes the timeline's queued runs in order, holding its
// lock: each claimed in one statement, which also says when runs left
// running by a dead worker must be closed first; first, when not zero, is
// the run the statement that took the lock claimed. trigger, when not nil, is
// how a claimed run's message is found when this process holds it (not read again).
func (q *Queue) runQueued(ctx context.Context, timeline string, trigger func(services.Run) *services.Message, h *heldLock, first services.Run) error {
	for ctx.Err() == nil {
		run, orphans := first, []services.Run(nil)
		first = services.Run{}
		if run.ID == 0 {
			var err error
			if run, orphans, err = q.claim(ctx, timeline, h); err != nil {
				return err
			}
		}
		for _, r := range orphans {
			if err := q.exec.InterruptRun(ctx, r); err != nil {
				return err
			}
		}
		if len(orphans) > 0 {
			continue
		}
		if run.ID == 0 {
			return nil
		}
		var msg *services.Message
		if trigger != nil {
			msg = trigger(run)
		}
		if err := q.exec.ExecuteClaimed(ctx, run, msg); err != nil {
			// The executor closes the run itself; an error here is about
			// recording, so stop and let River retry the job.
			return err
		}
	}
	return ctx.Err()
}

// interruptOrphans closes the timeline's main runs still marked running and
// returns them. Only called with the timeline lock held, so their worker is
// gone.
func (q *Queue) interruptOrphans(ctx context.Context, timeline string) ([]services.Run, error) {
	runs, err := q.store.ListRuns(ctx, services.RunQuery{TimelineScope: timeline, Status: services.RunRunning, Limit: 100})
	if err != nil {
		return nil, err
	}
	var closed []services.Run
	for _, r := range runs {
		if !r.IsMain() {
			continue
		}
		if err := q.exec.InterruptRun(ctx, r); err != nil {
			return closed, err
		}
		closed = append(closed, r)
	}
	return closed, nil
}

// reapLoop runs the reapers periodically (Start ran the first pass).
func (q *Queue) reapLoop(ctx context.Context) {
	t := time.NewTicker(q.opts.ReapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if q.opts.TurnWorkers > 0 {
			q.Reap(ctx)
		}
		q.reapLanes(ctx)
		q.reapFires(ctx)
	}
}

// Reap runs one pass of the reaper. Jobs commit with their runs, so no job
// is ever lost; the reaper only looks after workers that died:
//
//   - A main run still 'running' whose timeline lock is free lost its worker:
//     it is closed as interrupted, and the timeline's queued runs, which that
//     worker would have drained, are given to a new job.
//   - Queued runs on a timeline no worker holds and with no job waiting or
//     running (their jobs ended finding the timeline busy, and its worker
//     died between two runs) are given to a new job. A job still waiting,
//     e.g. one whose worker never picked it up, is left to run: nothing is
//     enqueued twice.
func (q *Queue) Reap(ctx context.Context) {
	done := map[string]bool{}
	running, err := q.mainTimelines(ctx, services.RunRunning)
	if err != nil {
		q.log.Warn("reaper: list running runs", "err", err)
		return
	}
	for _, timeline := range running {
		done[timeline] = true
		var closed []services.Run
		err := q.withTimelineLock(ctx, timeline, func() error {
			var err error
			closed, err = q.interruptOrphans(ctx, timeline)
			return err
		})
		if err != nil && !errors.Is(err, errBusy) {
			q.log.Warn("reaper: interrupt orphaned runs", "timeline", timeline, "err", err)
		}
		if len(closed) > 0 {
			// After letting go of the lock: the new job must find it free.
			q.resume(ctx, timeline, closed[len(closed)-1].ID)
		}
	}
	queued, err := q.mainTimelines(ctx, services.RunQueued)
	if err != nil {
		q.log.Warn("reaper: list queued runs", "err", err)
		return
	}
	for _, timeline := range queued {
		if done[timeline] {
			continue
		}
		idle, err := q.unattended(ctx, timeline)
		if err != nil {
			q.log.Warn("reaper: look at queued runs", "timeline", timeline, "err", err)
			continue
		}
		if idle {
			q.resume(ctx, timeline, 0)
		}
	}
}

// maxReapTimelines bounds the timelines one pass of the reaper (or the
// start's look for queued runs) takes up; the next pass takes the rest.
const maxReapTimelines = 200

// mainTimelines lists the timelines with a main run in status (queued or
// running), each once, the longest-waiting first: what Reap and
// startQueued look at.
func (q *Queue) mainTimelines(ctx context.Context, status services.RunStatus) ([]string, error) {
	return q.store.MainRunTimelines(ctx, status, maxReapTimelines)
}

// deadJobAfter: a turn job 'running' this long while nobody holds its
// timeline's lock lost its worker (a live job holds the lock while it runs
// a run and takes it again within milliseconds between two runs); its
// queued runs are given to a new job rather than wait for River's stuck-job
// rescue (AGENT_RUN_TIMEOUT + 2 min).
const deadJobAfter = 10 * time.Second

// unattended reports whether no worker holds the timeline and no job for it
// waits or runs (a job 'running' for deadJobAfter without the lock counts as
// dead). It takes no lock, so it never makes a worker's job find the
// timeline busy.
func (q *Queue) unattended(ctx context.Context, timeline string) (bool, error) {
	var busy bool
	err := q.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND classid = $1 AND objsubid = 2
			AND objid = hashtext(current_schema() || '/' || $2)::oid
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
		OR EXISTS (SELECT 1 FROM river_job WHERE kind = $3 AND args->>'timeline' = $2
			AND (state IN ('available', 'pending', 'retryable', 'scheduled')
				OR (state = 'running' AND attempted_at > now() - make_interval(secs => $4))))`,
		runLockKey, timeline, TurnArgs{}.Kind(), deadJobAfter.Seconds()).Scan(&busy)
	return !busy, err
}

// resume gives the timeline's queued runs to a new job (after closing run
// after, or 0), deduplicated against a job waiting or running for the same.
func (q *Queue) resume(ctx context.Context, timeline string, after int64) {
	next, err := q.store.NextQueuedRun(ctx, timeline)
	if services.IsKind(err, services.ENOTFOUND) {
		return
	}
	if err == nil {
		var res *rivertype.JobInsertResult
		res, err = q.client.Insert(ctx, TurnArgs{RunID: next.ID, Timeline: timeline, After: after}, turnOpts())
		if err == nil && !res.UniqueSkippedAsDuplicate {
			q.log.Info("reaper: queued runs given to a new job", "timeline", timeline, "run_id", next.ID, "after_run_id", after)
		}
	}
	if err != nil {
		q.log.Warn("reaper: resume queued runs", "timeline", timeline, "err", err)
	}
}
