// Package queue runs Switchboard's durable work on River, a PostgreSQL job
// queue: agent turns and outbound channel deliveries. Several instances
// share the work through the same tables; a job whose process died is
// retried by another.
//
// Agent turns are serialised per timeline with a session advisory lock held
// by the worker's connection: a second job for a busy timeline is snoozed,
// and whichever job holds the lock drains the timeline's queued runs in id
// order, so messages sent mid-run are answered in order and none is dropped.
// A lock held means a live worker: a run still 'running' whose timeline lock
// can be taken has lost its worker, and is closed as interrupted.
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/services"
)

const (
	queueTurns    = "agent_turns"
	queueOutbound = "outbound"
	// runLockKey is the first key of the per-timeline run lock.
	runLockKey = 7302
)

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
}

// Queue is the River client with Switchboard's workers.
type Queue struct {
	client   *river.Client[pgx.Tx]
	pool     *pgxpool.Pool
	store    services.Store
	exec     services.RunExecutor
	log      *slog.Logger
	opts     Options
	mu       sync.RWMutex
	handlers map[string]services.OutboundHandler
}

var (
	_ services.RunQueue      = (*Queue)(nil)
	_ services.OutboundQueue = (*Queue)(nil)
)

// TurnArgs is the job of one queued run.
type TurnArgs struct {
	RunID    int64  `json:"run_id"`
	Timeline string `json:"timeline"`
}

// Kind implements river.JobArgs.
func (TurnArgs) Kind() string { return "agent_turn" }

// OutboundArgs is the job of one outbound delivery.
type OutboundArgs struct {
	Channel string `json:"channel"`
	Key     string `json:"key"`
	Payload []byte `json:"payload"`
}

// Kind implements river.JobArgs.
func (OutboundArgs) Kind() string { return "outbound" }

// New builds the queue; call Start to work jobs.
func New(ctx context.Context, pool *pgxpool.Pool, store services.Store, exec services.RunExecutor, opts Options) (*Queue, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TurnWorkers <= 0 {
		opts.TurnWorkers = 16
	}
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = 10 * time.Minute
	}
	if opts.ReapEvery <= 0 {
		opts.ReapEvery = 15 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	q := &Queue{pool: pool, store: store, exec: exec, log: opts.Logger, opts: opts, handlers: map[string]services.OutboundHandler{}}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("queue: read schema: %w", err)
	}
	if schema == "public" {
		schema = ""
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &turnWorker{q: q})
	river.AddWorker(workers, &outboundWorker{q: q})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            opts.Logger.With("component", "river"),
		Schema:            schema,
		FetchPollInterval: opts.PollInterval,
		// River notifies workers of an insert at most once per FetchCooldown
		// per queue; a longer cooldown leaves back-to-back turns waiting for
		// the poll.
		FetchCooldown:        time.Millisecond,
		JobTimeout:           opts.RunTimeout + time.Minute,
		RescueStuckJobsAfter: opts.RunTimeout + 2*time.Minute,
		Queues: map[string]river.QueueConfig{
			queueTurns:    {MaxWorkers: opts.TurnWorkers},
			queueOutbound: {MaxWorkers: 8},
		},
		Workers: workers,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	q.client = client
	return q, nil
}

// HandleRuns registers the executor of queued runs (the agent runtime) when
// New was given none, so the queue can be built before the runtime that
// enqueues on it. Call it before Start.
func (q *Queue) HandleRuns(exec services.RunExecutor) { q.exec = exec }

// HandleOutbound registers the delivery function of a channel.
func (q *Queue) HandleOutbound(channel string, h services.OutboundHandler) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handlers[channel] = h
}

// Start works jobs and reaps runs of dead workers until ctx ends or Stop.
func (q *Queue) Start(ctx context.Context) error {
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("queue: start: %w", err)
	}
	go q.reapLoop(ctx)
	return nil
}

// Stop finishes jobs in flight (bounded by ctx) and stops.
func (q *Queue) Stop(ctx context.Context) error { return q.client.Stop(ctx) }

// EnqueueRun schedules a queued run; unique per run id.
func (q *Queue) EnqueueRun(ctx context.Context, run services.Run) error {
	_, err := q.client.Insert(ctx, TurnArgs{RunID: run.ID, Timeline: run.TimelineScope}, &river.InsertOpts{
		Queue:       queueTurns,
		MaxAttempts: 5,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	})
	if err != nil {
		return &services.Error{Kind: services.EUNAVAILABLE, Message: "could not schedule the agent's answer", Err: err}
	}
	return nil
}

// EnqueueOutbound schedules a delivery; unique per key.
func (q *Queue) EnqueueOutbound(ctx context.Context, o services.Outbound) error {
	if o.Channel == "" || o.Key == "" {
		return services.Errorf(services.EINVALID, "outbound delivery needs a channel and a key")
	}
	_, err := q.client.Insert(ctx, OutboundArgs{Channel: o.Channel, Key: o.Key, Payload: o.Payload}, &river.InsertOpts{
		Queue:       queueOutbound,
		MaxAttempts: 20,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	})
	if err != nil {
		return &services.Error{Kind: services.EUNAVAILABLE, Message: "could not schedule the delivery", Err: err}
	}
	return nil
}

type turnWorker struct {
	river.WorkerDefaults[TurnArgs]
	q *Queue
}

func (w *turnWorker) Work(ctx context.Context, job *river.Job[TurnArgs]) error {
	return w.q.drainTimeline(ctx, job.Args.Timeline)
}

// errBusy means another worker holds the timeline.
var errBusy = errors.New("timeline busy")

// withTimelineLock runs fn holding the timeline's run lock, or returns
// errBusy at once when another session holds it.
func (q *Queue) withTimelineLock(ctx context.Context, timeline string, fn func() error) error {
	conn, err := q.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema() || '/' || $2))`, runLockKey, timeline).Scan(&got); err != nil {
		return err
	}
	if !got {
		return errBusy
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema() || '/' || $2))`, runLockKey, timeline); err != nil {
			// The session may be broken; drop it so the lock goes with it.
			_ = conn.Conn().Close(uctx)
		}
	}()
	return fn()
}

// drainTimeline executes the timeline's queued runs in order, first closing
// runs left 'running' by a dead worker. When another worker holds the
// timeline, this job ends at once: that worker looks for queued runs again
// after it lets go of the lock, and this job's run was queued before the
// failed attempt, so it is found. (If that worker dies, the reaper
// re-enqueues queued runs.) Snoozing instead would delay the answer by the
// scheduler's period.
func (q *Queue) drainTimeline(ctx context.Context, timeline string) error {
	for {
		err := q.withTimelineLock(ctx, timeline, func() error {
			if err := q.interruptOrphans(ctx, timeline); err != nil {
				return err
			}
			for ctx.Err() == nil {
				run, err := q.store.NextQueuedRun(ctx, timeline)
				if services.IsKind(err, services.ENOTFOUND) {
					return nil
				}
				if err != nil {
					return err
				}
				if err := q.exec.ExecuteRun(ctx, run); err != nil {
					// The executor closes the run itself; an error here is about
					// recording, so stop and let River retry the job.
					return err
				}
			}
			return ctx.Err()
		})
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

// interruptOrphans closes the timeline's main runs still marked running. Only
// called with the timeline lock held, so their worker is gone.
func (q *Queue) interruptOrphans(ctx context.Context, timeline string) error {
	runs, err := q.store.ListRuns(ctx, services.RunQuery{TimelineScope: timeline, Status: services.RunRunning, Limit: 100})
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.ParentRunID != 0 {
			continue
		}
		if err := q.exec.InterruptRun(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// reapLoop finds runs whose worker died (lock free while 'running') and
// queued runs whose job was lost, at start and then periodically.
func (q *Queue) reapLoop(ctx context.Context) {
	t := time.NewTicker(q.opts.ReapEvery)
	defer t.Stop()
	for {
		q.Reap(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reap runs one pass of the reaper.
func (q *Queue) Reap(ctx context.Context) {
	running, err := q.store.ListRuns(ctx, services.RunQuery{Status: services.RunRunning, Limit: 200})
	if err != nil {
		q.log.Warn("reaper: list running runs", "err", err)
		return
	}
	seen := map[string]bool{}
	for _, r := range running {
		if r.ParentRunID != 0 || seen[r.TimelineScope] {
			continue
		}
		seen[r.TimelineScope] = true
		err := q.withTimelineLock(ctx, r.TimelineScope, func() error { return q.interruptOrphans(ctx, r.TimelineScope) })
		if err != nil && !errors.Is(err, errBusy) {
			q.log.Warn("reaper: interrupt orphaned runs", "timeline", r.TimelineScope, "err", err)
		}
	}
	queued, err := q.store.ListRuns(ctx, services.RunQuery{Status: services.RunQueued, Limit: 200})
	if err != nil {
		return
	}
	for _, r := range queued {
		if r.ParentRunID == 0 && time.Since(r.StartedAt) > q.opts.ReapEvery {
			if err := q.EnqueueRun(ctx, r); err != nil {
				q.log.Warn("reaper: re-enqueue run", "run_id", r.ID, "err", err)
			}
		}
	}
}

type outboundWorker struct {
	river.WorkerDefaults[OutboundArgs]
	q *Queue
}

func (w *outboundWorker) Work(ctx context.Context, job *river.Job[OutboundArgs]) error {
	w.q.mu.RLock()
	h := w.q.handlers[job.Args.Channel]
	w.q.mu.RUnlock()
	if h == nil {
		return river.JobSnooze(5 * time.Second) // channel not started on this instance yet
	}
	err := h(ctx, job.Args.Payload)
	var ra *services.RetryAfterError
	if errors.As(err, &ra) {
		return river.JobSnooze(ra.Delay)
	}
	return err
}
