package repository

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/services"
)

const runColumns = `id, timeline_scope, context_scope, COALESCE(agent_id, ''), COALESCE(parent_run_id, 0),
	COALESCE(trigger_message_id, 0), source, status, model, started_at, finished_at, heartbeat_at,
	COALESCE(error, ''), COALESCE(prompt_token_budget, 0), COALESCE(estimated_prompt_tokens, 0),
	COALESCE(model_context_window, 0), COALESCE(prompt_tokens, 0), COALESCE(completion_tokens, 0),
	COALESCE(cached_tokens, 0), COALESCE(tainted_by, ''), COALESCE(resumes_run_id, 0)`

func scanRun(row pgx.Row) (services.Run, error) {
	var r services.Run
	err := row.Scan(&r.ID, &r.TimelineScope, &r.ContextScope, &r.AgentID, &r.ParentRunID,
		&r.TriggerMessageID, &r.Source, &r.Status, &r.Model, &r.StartedAt, &r.FinishedAt, &r.HeartbeatAt,
		&r.Error, &r.PromptTokenBudget, &r.EstimatedPromptTokens,
		&r.ModelContextWindow, &r.PromptTokens, &r.CompletionTokens, &r.CachedTokens, &r.TaintedBy, &r.ResumesRunID)
	return r, err
}

// CreateRun inserts a run. Empty scopes take the column defaults.
func (s *Store) CreateRun(ctx context.Context, in services.NewRun) (services.Run, error) {
	if in.Source == "" {
		return services.Run{}, services.Errorf(services.EINVALID, "run source is empty")
	}
	status := in.Status
	if status == "" {
		status = services.RunQueued
	}
	const insert = `
		INSERT INTO agent_runs (timeline_scope, context_scope, agent_id, parent_run_id, trigger_message_id,
			source, status, model, tainted_by, resumes_run_id)
		VALUES (COALESCE(NULLIF($1, ''), 'global'), COALESCE(NULLIF($2, ''), 'main'), NULLIF($3, ''),
			NULLIF($4, 0)::integer, NULLIF($5, 0)::bigint, $6, $7, $8, NULLIF($9, ''), NULLIF($10, 0)::bigint)
		RETURNING ` + runColumns
	args := []any{in.TimelineScope, in.ContextScope, in.AgentID, in.ParentRunID, in.TriggerMessageID,
		in.Source, status, in.Model, in.TaintedBy, in.ResumesRunID}
	var events []string
	var before, after string
	announce := false
	if in.Announce && s.in != nil && s.claims != nil {
		timeline := in.TimelineScope
		if timeline == "" {
			timeline = "global"
		}
		var err error
		if before, after, err = s.claims.runEvent(timeline, status); err != nil {
			return services.Run{}, err
		}
		events, announce = s.in.carry(ctx, s.claims)
	}
	query := insert
	if announce {
		// The transaction's events so far, then the run's status, sent with
		// this statement ($11: the channel, $12: the events, $13 and $14:
		// the status event as the Notifier encodes it, before and after the
		// id): its COMMIT needs no NOTIFY of its own unless more are
		// published.
		query = `WITH r AS (` + insert + `), n AS (
			SELECT pg_notify($11, p) FROM (SELECT p, 0 AS k, i FROM unnest($12::text[]) WITH ORDINALITY AS e(p, i)
				UNION ALL SELECT $13 || id || $14, 1, 0 FROM r
				ORDER BY k, i) e)
		SELECT r.* FROM r WHERE (SELECT count(*) FROM n) >= 0`
		args = append(args, s.claims.channel, events, before, after)
	}
	r, err := scanRun(s.db.QueryRow(ctx, query, args...))
	if err != nil {
		return services.Run{}, wrapErr("create run", err)
	}
	r.Announced = announce
	if announce {
		s.claims.sends.Add(1)
	}
	return r, nil
}

// GetRun returns one run.
func (s *Store) GetRun(ctx context.Context, id int64) (services.Run, error) {
	r, err := scanRun(s.db.QueryRow(ctx, `SELECT `+runColumns+` FROM agent_runs WHERE id = $1`, id))
	if err != nil {
		return services.Run{}, wrapErr(fmt.Sprintf("get run %d", id), err)
	}
	return r, nil
}

// StartRun marks a queued run running in one statement.
func (s *Store) StartRun(ctx context.Context, id int64) (services.Run, bool, error) {
	r, err := scanRun(s.db.QueryRow(ctx, `
		UPDATE agent_runs SET status = $2, heartbeat_at = now()
		WHERE id = $1 AND status = $3 AND set_config('synchronous_commit', 'off', true) IS NOT NULL
		RETURNING `+runColumns, id, services.RunRunning, services.RunQueued))
	if err == pgx.ErrNoRows {
		r, err := s.GetRun(ctx, id)
		return r, false, err
	}
	if err != nil {
		return services.Run{}, false, wrapErr(fmt.Sprintf("start run %d", id), err)
	}
	return r, true, nil
}

// FinishRun closes an unfinished run exactly once.
func (s *Store) FinishRun(ctx context.Context, id int64, f services.RunFinish) (services.Run, error) {
	r, err := scanRun(s.db.QueryRow(ctx, `
		UPDATE agent_runs SET status = $2, error = NULLIF($3, ''), finished_at = now(),
			prompt_token_budget = NULLIF($4, 0), estimated_prompt_tokens = NULLIF($5, 0),
			model_context_window = NULLIF($6, 0), prompt_tokens = NULLIF($7, 0),
			completion_tokens = NULLIF($8, 0), cached_tokens = NULLIF($9, 0)
		WHERE id = $1 AND finished_at IS NULL
		RETURNING `+runColumns,
		id, f.Status, f.Error, f.PromptTokenBudget, f.EstimatedPromptTokens, f.ModelContextWindow,
		f.PromptTokens, f.CompletionTokens, f.CachedTokens))
	if err == pgx.ErrNoRows {
		if _, gerr := s.GetRun(ctx, id); gerr != nil {
			return services.Run{}, gerr
		}
		return services.Run{}, services.Errorf(services.ECONFLICT, "run %d is already finished", id)
	}
	if err != nil {
		return services.Run{}, wrapErr(fmt.Sprintf("finish run %d", id), err)
	}
	return r, nil
}

// ListRuns lists runs newest first, filtered by the non-zero fields of q.
func (s *Store) ListRuns(ctx context.Context, q services.RunQuery) ([]services.Run, error) {
	rows, err := s.db.Query(ctx, `
		SELECT `+runColumns+` FROM agent_runs
		WHERE ($1 = '' OR timeline_scope = $1)
		  AND ($2 = '' OR context_scope = $2)
		  AND ($3 = '' OR status = $3)
		  AND ($4 = 0 OR parent_run_id = $4)
		  AND ($5 = 0 OR id < $5)
		ORDER BY id DESC LIMIT $6`,
		q.TimelineScope, q.ContextScope, q.Status, q.ParentRunID, q.BeforeID, clampLimit(q.Limit))
	if err != nil {
		return nil, wrapErr("list runs", err)
	}
	defer rows.Close()
	var out []services.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, wrapErr("list runs", err)
		}
		out = append(out, r)
	}
	return out, wrapErr("list runs", rows.Err())
}

// NextQueuedRun returns the oldest queued main run of a timeline.
func (s *Store) NextQueuedRun(ctx context.Context, timelineScope string) (services.Run, error) {
	r, err := scanRun(s.db.QueryRow(ctx, `
		SELECT `+runColumns+` FROM agent_runs
		WHERE timeline_scope = $1 AND status = 'queued' AND parent_run_id IS NULL
		ORDER BY id LIMIT 1`, timelineScope))
	if err != nil {
		return services.Run{}, wrapErr(fmt.Sprintf("next queued run of %q", timelineScope), err)
	}
	return r, nil
}

// MainRunTimelines lists the timelines with a main run in status, each
// once, the one with the oldest such run first.
func (s *Store) MainRunTimelines(ctx context.Context, status services.RunStatus, limit int) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT timeline_scope FROM agent_runs
		WHERE status = $1 AND parent_run_id IS NULL AND agent_id IS DISTINCT FROM $2
		GROUP BY timeline_scope ORDER BY min(id) LIMIT $3`, status, services.ScheduleAgent, clampLimit(limit))
	if err != nil {
		return nil, wrapErr("list timelines of main runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrapErr("list timelines of main runs", err)
}

// turnJobKind is the kind of the River job that drains a timeline's
// queued runs (queue.TurnArgs; its args carry "run_id").
const turnJobKind = "agent_turn"

// ClaimNextRun starts the oldest queued main run of a timeline and
// completes its waiting job, or returns the timeline's orphans, in one
// statement: the data-modifying CTEs see the rows as they were before it,
// so "orphan" never lists the run it claims.
func (s *Store) ClaimNextRun(ctx context.Context, timelineScope string) (services.Run, []services.Run, error) {
	run, orphans, _, err := s.claimNextRun(ctx, s.db, timelineScope, claimSQL+`
		SELECT * FROM orphan UNION ALL SELECT * FROM claimed`)
	return run, orphans, err
}

// AnnounceClaims makes the claims send the claimed run's `running` status
// to the other instances with n, in the claim's statement (the run comes
// back Announced). Called once, before the store is used.
func (s *Store) AnnounceClaims(n *Notifier) { s.claims = n }

// ClaimNextRunReleasing is ClaimNextRun on conn, the session holding the
// timeline's run lock (the queue's advisory lock (lockKey, the hash of
// "schema/timeline")): when there is neither a run to claim nor an
// orphan, the same statement lets go of the lock (released), so a drain's
// last look costs no statement of its own.
func (s *Store) ClaimNextRunReleasing(ctx context.Context, conn *pgxpool.Conn, timelineScope string, lockKey int32) (run services.Run, orphans []services.Run, released bool, err error) {
	return s.claimNextRun(ctx, conn, timelineScope, claimSQL+`, found AS (SELECT * FROM orphan UNION ALL SELECT * FROM claimed)
		SELECT f.* FROM (SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM found)
			THEN pg_advisory_unlock($7, hashtext(current_schema() || '/' || $1)) END AS released) r
		LEFT JOIN found f ON true`, lockKey)
}

// ClaimNextRunLocking is a drain's first claim: on conn, the same
// statement first tries to take the timeline's run lock (the queue's
// advisory lock (lockKey, the hash of "schema/timeline"), held by conn's
// session afterwards) and claims only when it got it (locked), so taking
// the lock costs no statement of its own. The statement's snapshot is
// older than the lock, so what it read may be stale: a claim it makes was
// re-checked by its UPDATE (the run was still queued), but orphans and
// "nothing queued" may not hold, so none are returned: with run.ID == 0
// the caller claims again (ClaimNextRunReleasing), with the lock held and
// a fresh snapshot. The lock stays taken even when the statement fails
// after taking it (session advisory locks ignore the rollback): on an
// error the caller must let go of it or close conn.
func (s *Store) ClaimNextRunLocking(ctx context.Context, conn *pgxpool.Conn, timelineScope string, lockKey int32) (run services.Run, locked bool, err error) {
	// No row: the lock is held elsewhere; the one row of no run (or an
	// orphan): got, nothing claimed.
	run, orphans, none, err := s.claimNextRun(ctx, conn, timelineScope, claimCTEs(true)+`, found AS (SELECT * FROM orphan UNION ALL SELECT * FROM claimed)
		SELECT f.* FROM timeline_lock l LEFT JOIN found f ON true WHERE l.got`, lockKey)
	if err != nil {
		return services.Run{}, false, err
	}
	return run, none || run.ID != 0 || len(orphans) > 0, nil
}

// claimSQL is the claim's CTEs: orphan lists the timeline's orphans,
// claimed the run it starts.
var claimSQL = claimCTEs(false)

// claimCTEs is claimSQL; locking: first take the timeline's lock ($7),
// and read and claim only when it was got.
func claimCTEs(locking bool) string {
	lock, got := "", ""
	if locking {
		lock = `timeline_lock AS (SELECT pg_try_advisory_lock($7, hashtext(current_schema() || '/' || $1)) AS got), `
		got = ` AND (SELECT got FROM timeline_lock)`
	}
	return `
		WITH ` + lock + `orphan AS (
			SELECT ` + runColumns + `, false AS claimed FROM agent_runs
			WHERE timeline_scope = $1 AND status = 'running' AND parent_run_id IS NULL
			  AND agent_id IS DISTINCT FROM $2` + got + `
			ORDER BY id LIMIT 100
		), claimed AS (
			UPDATE agent_runs SET status = 'running', heartbeat_at = now()
			WHERE id = (SELECT id FROM agent_runs WHERE timeline_scope = $1 AND status = 'queued'
				AND parent_run_id IS NULL ORDER BY id LIMIT 1)
			  AND status = 'queued' AND NOT EXISTS (SELECT 1 FROM orphan)` + got + `
			  AND set_config('synchronous_commit', 'off', true) IS NOT NULL
			RETURNING ` + runColumns + `,
				-- The run's status to the other instances ($4: their channel, '' for none;
				-- $5 and $6: the event as the Notifier encodes it, before and after the id).
				(SELECT true FROM (SELECT CASE WHEN $4 <> '' THEN pg_notify($4, $5 || id || $6) END) n) AS claimed
		), job AS (
			UPDATE river_job SET state = 'completed', finalized_at = now()
			WHERE kind = $3 AND state IN ('scheduled', 'available')
			  AND args @> jsonb_build_object('run_id', (SELECT c.id FROM claimed c))
		)`
}

// claimNextRun runs a claim statement (claimSQL and its query) on db;
// released: it returned the one row of no run (its lock let go).
func (s *Store) claimNextRun(ctx context.Context, db DBTX, timelineScope, query string, more ...any) (run services.Run, orphans []services.Run, released bool, err error) {
	var channel, before, after string
	if s.claims != nil {
		channel = s.claims.channel
		if before, after, err = s.claims.runEvent(timelineScope, services.RunRunning); err != nil {
			return services.Run{}, nil, false, err
		}
	}
	rows, err := db.Query(ctx, query, append([]any{timelineScope, services.ScheduleAgent, turnJobKind, channel, before, after}, more...)...)
	if err != nil {
		return services.Run{}, nil, false, wrapErr(fmt.Sprintf("claim next run of %q", timelineScope), err)
	}
	defer rows.Close()
	for rows.Next() {
		if rows.RawValues()[0] == nil {
			released = true
			continue
		}
		var r services.Run
		var claimed bool
		if err := rows.Scan(&r.ID, &r.TimelineScope, &r.ContextScope, &r.AgentID, &r.ParentRunID,
			&r.TriggerMessageID, &r.Source, &r.Status, &r.Model, &r.StartedAt, &r.FinishedAt, &r.HeartbeatAt,
			&r.Error, &r.PromptTokenBudget, &r.EstimatedPromptTokens,
			&r.ModelContextWindow, &r.PromptTokens, &r.CompletionTokens, &r.CachedTokens, &r.TaintedBy, &r.ResumesRunID, &claimed); err != nil {
			return services.Run{}, nil, false, wrapErr("claim next run", err)
		}
		if claimed {
			run = r
			run.Announced = channel != ""
		} else {
			orphans = append(orphans, r)
		}
	}
	return run, orphans, released, wrapErr("claim next run", rows.Err())
}

// SetRunObservation records a run's prompt budget, estimate and window.
func (s *Store) SetRunObservation(ctx context.Context, id int64, budget, estimated, window int) error {
	_, err := s.db.Exec(ctx, `
		UPDATE agent_runs SET prompt_token_budget = $2, estimated_prompt_tokens = $3,
			model_context_window = $4, heartbeat_at = now()
		WHERE id = $1 AND set_config('synchronous_commit', 'off', true) IS NOT NULL`, id, budget, estimated, window)
	return wrapErr(fmt.Sprintf("observe run %d", id), err)
}

// SetRunContextScope sets a run's context scope (a child run's scope names
// its own id, known only after insert).
func (s *Store) SetRunContextScope(ctx context.Context, id int64, scope string) error {
	tag, err := s.db.Exec(ctx, `UPDATE agent_runs SET context_scope = $2 WHERE id = $1`, id, scope)
	if err != nil {
		return wrapErr(fmt.Sprintf("set run %d scope", id), err)
	}
	if tag.RowsAffected() == 0 {
		return services.Errorf(services.ENOTFOUND, "run %d not found", id)
	}
	return nil
}

// SetRunTaint records the first origin that tainted a run.
func (s *Store) SetRunTaint(ctx context.Context, id int64, origin string) error {
	_, err := s.db.Exec(ctx, `UPDATE agent_runs SET tainted_by = $2 WHERE id = $1 AND tainted_by IS NULL`, id, origin)
	return wrapErr("set run taint", err)
}
