package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/switchboard/switchboard/services"
)

// FallbackAfter is how long the job of a run started in this process
// waits before River may work it. The in-process start claims the run (and
// completes the job) within milliseconds of the commit; the job only runs
// when this process died between the commit and the start, or could not
// start it. Either way the timeline lock and the claim keep it once.
const FallbackAfter = 2 * time.Second

// localTurns are the runs this process started itself: at most
// cap(slots) drains at once (shared with the River turn workers), and the
// timelines a drain here holds.
type localTurns struct {
	slots chan struct{}

	mu   sync.Mutex
	held map[string]*heldTimeline
	// stopped: Stop was called; nothing more starts here.
	stopped bool
	// ctx bounds the in-process runs; cancel cuts them short at shutdown.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startLocal makes this queue start runs in-process: its own Enqueuer's
// StartRunTx and those of Options.Starts. Only a queue serving turns does.
func (q *Queue) startLocal(ctx context.Context) {
	if q.local.slots == nil {
		return
	}
	q.local.mu.Lock()
	q.local.ctx, q.local.cancel = context.WithCancel(ctx)
	q.local.held = map[string]*heldTimeline{}
	q.local.mu.Unlock()
	q.Enqueuer.local.Store(q)
	for _, e := range q.opts.Starts {
		e.local.Store(q)
	}
}

// stopLocalIntake makes new runs wait for their jobs.
func (q *Queue) stopLocalIntake() {
	q.local.mu.Lock()
	q.local.stopped = true
	q.local.mu.Unlock()
	q.Enqueuer.local.CompareAndSwap(q, nil)
	for _, e := range q.opts.Starts {
		e.local.CompareAndSwap(q, nil)
	}
}

// waitLocal waits for the in-process runs to finish until ctx ends, then
// cuts them short (their runs are left running, for the reaper of the
// next instance, as River's jobs cut short are) and waits for that.
func (q *Queue) waitLocal(ctx context.Context) {
	done := make(chan struct{})
	go func() { q.local.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	q.local.mu.Lock()
	cancel := q.local.cancel
	q.local.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	<-done
}

// StartRunTx inserts run's job in tx; when this process serves turns and
// has a worker free, the job is scheduled FallbackAfter later and the
// returned start runs the run here once tx commits.
func (e *Enqueuer) StartRunTx(ctx context.Context, tx services.Tx, run services.Run) (func(context.Context, services.Message), error) {
	q := e.local.Load()
	if q == nil || len(q.local.slots) == cap(q.local.slots) {
		return nil, e.EnqueueRunTx(ctx, tx, run)
	}
	ptx, err := pgxTx(tx)
	if err != nil {
		return nil, err
	}
	opts := turnOpts()
	opts.ScheduledAt = time.Now().Add(FallbackAfter)
	res, err := e.client.InsertTx(ctx, ptx, TurnArgs{RunID: run.ID, Timeline: run.TimelineScope}, opts)
	if err != nil {
		return nil, &services.Error{Kind: services.EUNAVAILABLE, Message: "could not schedule the agent's answer", Err: err}
	}
	jobID := res.Job.ID
	return func(ctx context.Context, trigger services.Message) {
		if !q.startTurn(run.TimelineScope, trigger) {
			// No worker free any more: the job runs it now, not later.
			if _, err := e.client.JobRetry(ctx, jobID); err != nil {
				q.log.Warn("in-process start: hand the run to its job", "run_id", run.ID, "err", err)
			}
		}
	}, nil
}

// startTurn drains timeline in a goroutine of its own, taking a worker's
// slot; false when none is free or the queue is stopping.
func (q *Queue) startTurn(timeline string, trigger services.Message) bool {
	select {
	case q.local.slots <- struct{}{}:
	default:
		return false
	}
	q.local.mu.Lock()
	if q.local.stopped || q.local.ctx == nil {
		q.local.mu.Unlock()
		<-q.local.slots
		return false
	}
	ctx := q.local.ctx
	q.local.wg.Add(1)
	q.local.mu.Unlock()
	go func() {
		defer q.local.wg.Done()
		defer func() { <-q.local.slots }()
		if err := q.drainLocal(ctx, timeline, trigger); err != nil && ctx.Err() == nil {
			// The run's job (or the reaper) takes it from here.
			q.log.Warn("in-process run", "timeline", timeline, "err", err)
		}
	}()
	return true
}

// heldTimeline is a timeline a drain here holds: again says a start asked
// it to look again before it lets go; triggers are those starts' messages,
// handed to their runs so they are not read again.
type heldTimeline struct {
	again    bool
	triggers []services.Message
}

// trigger takes the held message of run, or nil.
func (h *heldTimeline) trigger(run services.Run) *services.Message {
	for i, m := range h.triggers {
		if m.ID == run.TriggerMessageID {
			h.triggers = append(h.triggers[:i], h.triggers[i+1:]...)
			return &m
		}
	}
	return nil
}

// drainLocal runs the timeline's queued runs under its lock, as a job's
// worker does, unless a drain in this process holds the timeline: that
// one is asked to look again before it lets go. A timeline held by another
// session (a job's worker here or elsewhere) is left to it: that holder
// looks for queued runs after it lets go, and the run's job is the
// fallback.
func (q *Queue) drainLocal(ctx context.Context, timeline string, trigger services.Message) error {
	h := q.enter(timeline, trigger)
	if h == nil {
		return nil
	}
	for {
		err := q.drainHeld(ctx, timeline, q.heldTrigger(h))
		if err != nil && !errors.Is(err, errBusy) {
			q.local.mu.Lock()
			delete(q.local.held, timeline)
			q.local.mu.Unlock()
			return err
		}
		if !q.leave(timeline) {
			return nil
		}
	}
}

// heldTrigger finds a claimed run's message among h's triggers.
func (q *Queue) heldTrigger(h *heldTimeline) func(services.Run) *services.Message {
	return func(run services.Run) *services.Message {
		q.local.mu.Lock()
		defer q.local.mu.Unlock()
		return h.trigger(run)
	}
}

// enter marks timeline held by a drain here and returns its mark; nil
// (and the holder asked to look again, trigger handed to it) when one
// holds it already.
func (q *Queue) enter(timeline string, trigger services.Message) *heldTimeline {
	q.local.mu.Lock()
	defer q.local.mu.Unlock()
	if h, ok := q.local.held[timeline]; ok {
		h.again = true
		h.triggers = append(h.triggers, trigger)
		return nil
	}
	h := &heldTimeline{triggers: []services.Message{trigger}}
	q.local.held[timeline] = h
	return h
}

// leave is called after the timeline's lock is let go: true when a start
// asked meanwhile to look again (the timeline stays marked), else it is
// unmarked.
func (q *Queue) leave(timeline string) bool {
	q.local.mu.Lock()
	defer q.local.mu.Unlock()
	h := q.local.held[timeline]
	if h.again {
		h.again = false
		return true
	}
	delete(q.local.held, timeline)
	return false
}

// startQueued starts here, at once, the queued main runs a dead process
// left (killed between a question's commit and its in-process start):
// their fallback jobs are scheduled, and moving a scheduled job to
// available is River's leader's work, which waits for the dead leader's
// lease to run out. The timeline lock and the claim keep each run once
// (a claimed run's job is completed; a timeline a live worker holds is
// left to it).
func (q *Queue) startQueued(ctx context.Context) {
	queued, err := q.mainTimelines(ctx, services.RunQueued)
	if err != nil {
		q.log.Warn("start queued runs", "err", err)
		return
	}
	for _, timeline := range queued {
		q.startTurn(timeline, services.Message{})
	}
}
