package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/services"
)

// Outbound deliveries go out in lanes. A delivery is a row of
// outbound_deliveries, inserted with its job in the caller's transaction;
// the job only wakes a worker for the delivery's lane (one Telegram chat).
// That worker takes the lane's advisory lock and sends the lane's pending
// deliveries in id order, one at a time: while the head of a lane waits
// (Telegram's 429, a failed call retried with backoff), nothing behind it
// overtakes it, and a job that finds its lane busy ends at once, the lock's
// holder looking again for pending deliveries after it lets go. A lane whose
// worker died (kill -9) is handed to a new job by the lane reaper, at start
// and every ReapEvery, without waiting for River's stuck-job rescue.

// maxDeliveryAttempts bounds the failed attempts of one delivery (429s do
// not count); then it is given up, logged, and the lane goes on. Between
// attempts the delivery waits retryDelay (1 s doubling to 5 min).
const maxDeliveryAttempts = 20

// OutboundArgs is the job of one outbound delivery: it drains the lane.
type OutboundArgs struct {
	Channel string `json:"channel" river:"unique"`
	Key     string `json:"key" river:"unique"`
	Lane    string `json:"lane,omitempty"`
	// Payload is set only on jobs enqueued before lanes existed: their
	// delivery row is created when the job runs.
	Payload []byte `json:"payload,omitempty"`
}

// Kind implements river.JobArgs.
func (OutboundArgs) Kind() string { return "outbound" }

func outboundOpts() *river.InsertOpts {
	// The delivery row makes a key unique for good; the job is unique only
	// while it waits or runs, so the lane reaper can wake a lane again.
	return &river.InsertOpts{Queue: queueOutbound, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}}
}

// EnqueueOutbound schedules a delivery in its lane (o.Lane; empty: a lane
// of its own) in a transaction of its own; a key already scheduled does
// nothing.
func (e *Enqueuer) EnqueueOutbound(ctx context.Context, o services.Outbound) error {
	return e.enqueueOutbound(ctx, o, func(insert func(pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, e.pool, insert)
	})
}

// EnqueueOutboundTx is EnqueueOutbound in tx: the delivery commits with it.
func (e *Enqueuer) EnqueueOutboundTx(ctx context.Context, tx services.Tx, o services.Outbound) error {
	ptx, err := pgxTx(tx)
	if err != nil {
		return err
	}
	return e.enqueueOutbound(ctx, o, func(insert func(pgx.Tx) error) error { return insert(ptx) })
}

// enqueueOutbound inserts o's delivery row and its job with in, which runs
// the insert in a transaction.
func (e *Enqueuer) enqueueOutbound(ctx context.Context, o services.Outbound, in func(insert func(pgx.Tx) error) error) error {
	if o.Channel == "" || o.Key == "" {
		return services.Errorf(services.EINVALID, "outbound delivery needs a channel and a key")
	}
	if o.Lane == "" {
		o.Lane = "key:" + o.Key
	}
	err := in(func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO outbound_deliveries (channel, key, lane, payload) VALUES ($1, $2, $3, $4)
			ON CONFLICT (channel, key) DO NOTHING RETURNING id`, string(o.Channel), o.Key, o.Lane, []byte(o.Payload)).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // scheduled before
		}
		if err != nil {
			return err
		}
		_, err = e.client.InsertTx(ctx, tx, OutboundArgs{Channel: string(o.Channel), Key: o.Key, Lane: o.Lane}, outboundOpts())
		return err
	})
	if err != nil {
		return &services.Error{Kind: services.EUNAVAILABLE, Message: "could not schedule the delivery", Err: err}
	}
	return nil
}

type outboundWorker struct {
	river.WorkerDefaults[OutboundArgs]
	q *Queue
}

func (w *outboundWorker) Work(ctx context.Context, job *river.Job[OutboundArgs]) error {
	a := job.Args
	if a.Lane == "" {
		// A job from before lanes: its payload becomes a delivery of its own lane.
		a.Lane = "key:" + a.Key
		if _, err := w.q.pool.Exec(ctx, `INSERT INTO outbound_deliveries (channel, key, lane, payload) VALUES ($1, $2, $3, $4)
			ON CONFLICT (channel, key) DO NOTHING`, a.Channel, a.Key, a.Lane, a.Payload); err != nil {
			return err
		}
	}
	return w.q.drainLane(ctx, a.Channel, a.Lane)
}

// errSnooze carries a lane's wait out of its lock.
type errSnooze struct{ d time.Duration }

func (e errSnooze) Error() string { return fmt.Sprintf("snooze %s", e.d) }

type delivery struct {
	id        int64
	key       string
	payload   []byte
	attempts  int
	notBefore *time.Time
}

// retryDelay is the wait after the n-th failed attempt of a delivery: 1 s
// doubling to 5 min.
func retryDelay(n int) time.Duration {
	d := time.Second << min(max(n-1, 0), 9)
	return min(d, 5*time.Minute)
}

// drainLane sends the lane's pending deliveries in order (see above).
func (q *Queue) drainLane(ctx context.Context, channel, lane string) error {
	h := q.handlers[services.Source(channel)]
	if h == nil {
		return river.JobSnooze(5 * time.Second) // the channel is not started on this instance (yet)
	}
	for {
		err := q.withLock(ctx, laneLockKey, channel+"/"+lane, func() error {
			for ctx.Err() == nil {
				d, err := q.nextDelivery(ctx, channel, lane)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				if err != nil {
					return err
				}
				if d.notBefore != nil {
					if wait := time.Until(*d.notBefore); wait > 0 {
						// The head waits out a 429 or a backoff: so does the lane.
						return errSnooze{wait}
					}
				}
				if err := q.deliver(ctx, h, channel, d); err != nil {
					return err
				}
			}
			return ctx.Err()
		})
		var sn errSnooze
		switch {
		case errors.Is(err, errBusy):
			return nil
		case errors.As(err, &sn):
			return river.JobSnooze(sn.d)
		case err != nil:
			return err
		}
		// A delivery scheduled after our last look, whose job found us busy.
		if _, err := q.nextDelivery(ctx, channel, lane); errors.Is(err, pgx.ErrNoRows) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func (q *Queue) nextDelivery(ctx context.Context, channel, lane string) (delivery, error) {
	var d delivery
	err := q.pool.QueryRow(ctx, `SELECT id, key, payload, attempts, not_before FROM outbound_deliveries
		WHERE channel = $1 AND lane = $2 AND done_at IS NULL ORDER BY id LIMIT 1`, channel, lane).
		Scan(&d.id, &d.key, &d.payload, &d.attempts, &d.notBefore)
	return d, err
}

// deliver sends one delivery, the head of its lane. nil: it is done (sent
// or given up) and the lane goes on; errSnooze: the lane waits, the wait
// recorded on the delivery (not_before) so that no other job of the lane
// calls the channel before it ends either.
func (q *Queue) deliver(ctx context.Context, h services.OutboundHandler, channel string, d delivery) error {
	err := h(ctx, d.payload)
	var ra *services.RetryAfterError
	switch {
	case err == nil:
		_, err = q.pool.Exec(ctx, `UPDATE outbound_deliveries SET done_at = now(), not_before = NULL WHERE id = $1`, d.id)
		return err
	case errors.As(err, &ra):
		// Telegram's retry_after: not an attempt that failed.
		if _, uerr := q.pool.Exec(ctx, `UPDATE outbound_deliveries SET not_before = now() + $2 * interval '1 millisecond' WHERE id = $1`,
			d.id, ra.Delay.Milliseconds()); uerr != nil {
			return uerr
		}
		return errSnooze{ra.Delay}
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if d.attempts+1 >= maxDeliveryAttempts {
		q.log.Error("outbound delivery given up", "channel", channel, "key", d.key, "attempts", d.attempts+1, "err", err)
		_, uerr := q.pool.Exec(ctx, `UPDATE outbound_deliveries SET attempts = attempts + 1, last_error = $2,
			done_at = now(), failed_at = now() WHERE id = $1`, d.id, err.Error())
		return uerr
	}
	wait := retryDelay(d.attempts + 1)
	q.log.Warn("outbound delivery failed; retrying", "channel", channel, "key", d.key, "attempt", d.attempts+1, "in", wait.String(), "err", err)
	if _, uerr := q.pool.Exec(ctx, `UPDATE outbound_deliveries SET attempts = attempts + 1, last_error = $2,
		not_before = now() + $3 * interval '1 millisecond' WHERE id = $1`, d.id, err.Error(), wait.Milliseconds()); uerr != nil {
		return uerr
	}
	return errSnooze{wait}
}

// reapLanes wakes every lane with pending deliveries that no worker holds
// and no job waits for (a job waiting out a 429 or a backoff is left to
// wait): its worker died. A job 'running' without the lane's lock is dead
// or about to take it; a second job for the lane is harmless, it finds the
// lane busy or empty.
func (q *Queue) reapLanes(ctx context.Context) {
	rows, err := q.pool.Query(ctx, `
		SELECT d.channel, d.lane, min(d.id) FROM outbound_deliveries d
		WHERE d.done_at IS NULL
		  AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
		        AND l.classid = $1 AND l.objsubid = 2
		        AND l.objid = hashtext(current_schema() || '/' || d.channel || '/' || d.lane)::oid)
		  AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = $2
		        AND j.state IN ('available', 'pending', 'scheduled', 'retryable')
		        AND j.args->>'channel' = d.channel AND coalesce(j.args->>'lane', 'key:' || (j.args->>'key')) = d.lane)
		GROUP BY d.channel, d.lane LIMIT 200`, laneLockKey, OutboundArgs{}.Kind())
	if err != nil {
		q.log.Warn("reaper: list idle lanes", "err", err)
		return
	}
	type lane struct {
		channel, lane string
		head          int64
	}
	var idle []lane
	for rows.Next() {
		var l lane
		if err := rows.Scan(&l.channel, &l.lane, &l.head); err != nil {
			q.log.Warn("reaper: list idle lanes", "err", err)
			rows.Close()
			return
		}
		idle = append(idle, l)
	}
	rows.Close()
	for _, l := range idle {
		res, err := q.client.Insert(ctx, OutboundArgs{Channel: l.channel, Lane: l.lane, Key: fmt.Sprintf("resume:%d", l.head)}, outboundOpts())
		if err != nil {
			q.log.Warn("reaper: wake lane", "lane", l.lane, "err", err)
			continue
		}
		if !res.UniqueSkippedAsDuplicate {
			q.log.Info("reaper: deliveries of a lane given to a new job", "channel", l.channel, "lane", l.lane, "head", l.head)
		}
	}
}
