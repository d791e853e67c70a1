package queue

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/services"
)

const (
	queueSchedules = "schedules"
	// scheduleLockKey is the first key of the per-schedule fire lock.
	scheduleLockKey = 7304
	// ScheduleWorkers is how many schedules one instance fires at once.
	ScheduleWorkers = 4
	// busySnooze is how long a fire whose schedule is still firing (its
	// previous fire runs elsewhere) waits before it looks again.
	busySnooze = 2 * time.Second
)

// FireArgs is the job of one due fire of a schedule.
type FireArgs struct {
	ScheduleID int64     `json:"schedule_id"`
	FireAt     time.Time `json:"fire_at"`
}

// Kind implements river.JobArgs.
func (FireArgs) Kind() string { return "schedule_fire" }

var _ services.ScheduleQueue = (*Enqueuer)(nil)

// fireUniqueStates are the states a fire's job is deduplicated against:
// every state it may be in, finished ones included, so one (schedule, time)
// is inserted once, ever.
var fireUniqueStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable,
	rivertype.JobStateScheduled, rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded,
}

// EnqueueFireTx inserts, in tx, the job that fires schedule id at at (River
// holds it until then); the same (schedule, time) is inserted once.
func (e *Enqueuer) EnqueueFireTx(ctx context.Context, tx services.Tx, scheduleID int64, at time.Time) error {
	ptx, err := pgxTx(tx)
	if err != nil {
		return err
	}
	_, err = e.client.InsertTx(ctx, ptx, FireArgs{ScheduleID: scheduleID, FireAt: at.UTC()}, &river.InsertOpts{
		Queue: queueSchedules, ScheduledAt: at, MaxAttempts: 5,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: fireUniqueStates},
	})
	if err != nil {
		return &services.Error{Kind: services.EUNAVAILABLE, Message: "could not schedule the next fire", Err: err}
	}
	return nil
}

type fireWorker struct {
	river.WorkerDefaults[FireArgs]
	q *Queue
}

// Work runs the fire holding its schedule's lock; while another worker
// holds it (the previous fire still runs) the job waits and looks again.
func (w *fireWorker) Work(ctx context.Context, job *river.Job[FireArgs]) error {
	if w.q.fires == nil {
		return river.JobCancel(errors.New("this instance runs no schedules"))
	}
	err := w.q.withLock(ctx, scheduleLockKey, services.ScheduleScope(job.Args.ScheduleID), func() error {
		return w.q.fires.ExecuteFire(ctx, job.Args.ScheduleID, job.Args.FireAt)
	})
	if errors.Is(err, errBusy) {
		return river.JobSnooze(busySnooze)
	}
	return err
}

// reapFires closes fires left running by a worker that died: a fire marked
// running whose schedule lock is free has no worker. It ends interrupted
// and is not run again; the schedule's next fire was scheduled when it
// began.
func (q *Queue) reapFires(ctx context.Context) {
	if q.fires == nil {
		return
	}
	fires, err := q.store.RunningFires(ctx)
	if err != nil {
		q.log.Warn("reaper: list running fires", "err", err)
		return
	}
	for _, f := range fires {
		err := q.withLock(ctx, scheduleLockKey, services.ScheduleScope(f.ScheduleID), func() error {
			return q.fires.InterruptFire(ctx, f)
		})
		if err != nil && !errors.Is(err, errBusy) {
			q.log.Warn("reaper: interrupt fire", "schedule_id", f.ScheduleID, "fire_id", f.ID, "err", err)
		}
	}
}
