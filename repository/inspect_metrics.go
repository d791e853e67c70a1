package repository

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/services/metrics"
)

var _ metrics.Source = (*Store)(nil)

// MetricsSnapshot reads the database gauges of /metrics in one read-only
// round of cheap queries: visible messages by channel (an index-only count
// on a single owner's history), River jobs not yet finalized, and open runs
// (the partial index idx_agent_runs_status).
func (s *Store) MetricsSnapshot(ctx context.Context) (metrics.Snapshot, error) {
	snap := metrics.Snapshot{MessagesByChannel: map[string]int64{}, UnfinishedRuns: map[string]int64{}}
	rows, err := s.db.Query(ctx, `SELECT source, count(*) FROM chat_messages WHERE visible = 1 GROUP BY source`)
	if err != nil {
		return snap, wrapErr("metrics: messages by channel", err)
	}
	for rows.Next() {
		var src string
		var n int64
		if err := rows.Scan(&src, &n); err != nil {
			rows.Close()
			return snap, wrapErr("metrics: messages by channel", err)
		}
		snap.MessagesByChannel[src] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return snap, wrapErr("metrics: messages by channel", err)
	}

	rows, err = s.db.Query(ctx, `
		SELECT queue, state::text, count(*) FROM river_job
		WHERE state IN ('available', 'scheduled', 'running', 'retryable', 'pending')
		GROUP BY queue, state ORDER BY queue, state`)
	if err != nil {
		return snap, wrapErr("metrics: queue depth", err)
	}
	for rows.Next() {
		var q metrics.QueueJobs
		if err := rows.Scan(&q.Queue, &q.State, &q.Jobs); err != nil {
			rows.Close()
			return snap, wrapErr("metrics: queue depth", err)
		}
		snap.QueueJobs = append(snap.QueueJobs, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return snap, wrapErr("metrics: queue depth", err)
	}

	rows, err = s.db.Query(ctx, `
		SELECT status, count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(started_at)), 0)::float8
		FROM agent_runs WHERE finished_at IS NULL GROUP BY status`)
	if err != nil {
		return snap, wrapErr("metrics: unfinished runs", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		var age float64
		if err := rows.Scan(&status, &n, &age); err != nil {
			return snap, wrapErr("metrics: unfinished runs", err)
		}
		snap.UnfinishedRuns[status] = n
		if d := time.Duration(age * float64(time.Second)); d > snap.OldestUnfinishedRun {
			snap.OldestUnfinishedRun = d
		}
	}
	return snap, wrapErr("metrics: unfinished runs", rows.Err())
}
