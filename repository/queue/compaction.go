package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/services"
)

const (
	queueCompaction = "compaction"
	// compactLockKey is the first key of the per-(timeline, scope)
	// compaction lock.
	compactLockKey = 7305
	// CompactionWorkers is how many scopes one instance compacts at once.
	CompactionWorkers = 2
)

var _ services.CompactionQueue = (*Enqueuer)(nil)

// CompactArgs is the job of one scope's compaction. It runs outside the
// timeline's run lock: the next message is answered meanwhile, from the
// cursor as it was.
type CompactArgs struct {
	Timeline string `json:"timeline" river:"unique"`
	Scope    string `json:"scope" river:"unique"`
}

// Kind implements river.JobArgs.
func (CompactArgs) Kind() string { return "compact" }

func compactOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: queueCompaction, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}}
}

// EnqueueCompaction inserts a compaction job on its own; a job for the
// same scope already waiting or running makes it a no-op.
func (e *Enqueuer) EnqueueCompaction(ctx context.Context, timeline, scope string) error {
	_, err := e.client.Insert(ctx, CompactArgs{Timeline: timeline, Scope: scope}, compactOpts())
	return compactionErr(err)
}

// EnqueueCompactionTx is EnqueueCompaction in tx.
func (e *Enqueuer) EnqueueCompactionTx(ctx context.Context, tx services.Tx, timeline, scope string) error {
	ptx, err := pgxTx(tx)
	if err != nil {
		return err
	}
	_, err = e.client.InsertTx(ctx, ptx, CompactArgs{Timeline: timeline, Scope: scope}, compactOpts())
	return compactionErr(err)
}

func compactionErr(err error) error {
	if err != nil {
		return &services.Error{Kind: services.EUNAVAILABLE, Message: "could not schedule the compaction", Err: err}
	}
	return nil
}

type compactWorker struct {
	river.WorkerDefaults[CompactArgs]
	q *Queue
}

// Work compacts the scope holding its compaction lock. A job that finds
// the lock held ends: the holder is compacting the same scope now.
func (w *compactWorker) Work(ctx context.Context, job *river.Job[CompactArgs]) error {
	if w.q.compactions == nil {
		return river.JobCancel(errors.New("this instance runs no compactions"))
	}
	err := w.q.withLock(ctx, compactLockKey, job.Args.Timeline+"/"+job.Args.Scope, func() error {
		return w.q.compactions.ExecuteCompaction(ctx, job.Args.Timeline, job.Args.Scope, fmt.Sprint(job.ID))
	})
	if errors.Is(err, errBusy) {
		return nil
	}
	return err
}
