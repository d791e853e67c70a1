package repository

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var _ services.ApprovalStore = (*Store)(nil)

const approvalColumns = `id, run_id, timeline_scope, context_scope, COALESCE(trigger_message_id, 0), call_id, tool,
	arguments, effect, COALESCE(tainted_by, ''), state, detached, COALESCE(resume_run_id, 0), COALESCE(decided_by, ''),
	COALESCE(result, ''), created_at, expires_at, decided_at`

func scanApproval(row pgx.Row) (services.Approval, error) {
	var a services.Approval
	var args []byte
	err := row.Scan(&a.ID, &a.RunID, &a.TimelineScope, &a.ContextScope, &a.TriggerMessageID, &a.CallID, &a.Tool,
		&args, &a.Effect, &a.TaintedBy, &a.State, &a.Detached, &a.ResumeRunID, &a.DecidedBy,
		&a.Result, &a.CreatedAt, &a.ExpiresAt, &a.DecidedAt)
	a.Arguments = args
	return a, err
}

// CreateApproval stores a pending approval.
func (s *Store) CreateApproval(ctx context.Context, a services.Approval) (services.Approval, error) {
	if a.Tool == "" || a.CallID == "" || a.RunID == 0 || a.ExpiresAt.IsZero() {
		return services.Approval{}, services.Errorf(services.EINVALID, "an approval needs a run, a call id, a tool and a deadline")
	}
	args := a.Arguments
	if len(args) == 0 {
		args = []byte("{}")
	}
	out, err := scanApproval(s.db.QueryRow(ctx, `
		INSERT INTO approvals (run_id, timeline_scope, context_scope, trigger_message_id, call_id, tool, arguments,
			effect, tainted_by, detached, expires_at)
		VALUES ($1, $2, COALESCE(NULLIF($3, ''), 'main'), NULLIF($4, 0)::bigint, $5, $6, $7, $8, NULLIF($9, ''), $10, $11)
		RETURNING `+approvalColumns,
		a.RunID, a.TimelineScope, a.ContextScope, a.TriggerMessageID, a.CallID, a.Tool, args,
		a.Effect, a.TaintedBy, a.Detached, a.ExpiresAt))
	return out, wrapErr("create approval", err)
}

// GetApproval returns one approval.
func (s *Store) GetApproval(ctx context.Context, id int64) (services.Approval, error) {
	a, err := scanApproval(s.db.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
	if err == pgx.ErrNoRows {
		return services.Approval{}, services.Errorf(services.ENOTFOUND, "no approval #%d", id)
	}
	return a, wrapErr("get approval", err)
}

// ListApprovals lists approvals oldest first.
func (s *Store) ListApprovals(ctx context.Context, q services.ApprovalQuery) ([]services.Approval, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.State != "" {
		add("state = $%d", q.State)
	}
	if len(q.IDs) > 0 {
		add("id = ANY($%d)", q.IDs)
	}
	if q.RunID != 0 {
		add("run_id = $%d", q.RunID)
	}
	if q.ResumeRunID != 0 {
		add("resume_run_id = $%d", q.ResumeRunID)
	}
	if !q.ExpiredBy.IsZero() {
		add("state = 'pending' AND expires_at <= $%d", q.ExpiredBy)
	}
	limit := q.Limit
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	sql := `SELECT ` + approvalColumns + ` FROM approvals`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, " AND ")
	}
	sql += fmt.Sprintf(` ORDER BY id LIMIT %d`, limit)
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrapErr("list approvals", err)
	}
	defer rows.Close()
	var out []services.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, wrapErr("scan approval", err)
		}
		out = append(out, a)
	}
	return out, wrapErr("list approvals", rows.Err())
}

// TransitionApproval moves an approval from one state to another in one
// conditional statement: of two decisions at once, exactly one wins.
func (s *Store) TransitionApproval(ctx context.Context, id int64, from, to services.ApprovalState, by, result string) (services.Approval, error) {
	a, err := scanApproval(s.db.QueryRow(ctx, `
		UPDATE approvals SET state = $3, decided_by = COALESCE(NULLIF($4, ''), decided_by),
			result = COALESCE(NULLIF($5, ''), result),
			decided_at = CASE WHEN $2 = 'pending' THEN now() ELSE decided_at END
		WHERE id = $1 AND state = $2
		RETURNING `+approvalColumns, id, from, to, by, result))
	if err == pgx.ErrNoRows {
		cur, gerr := s.GetApproval(ctx, id)
		if gerr != nil {
			return services.Approval{}, gerr
		}
		how := string(cur.State)
		if cur.DecidedBy != "" {
			how += " (via " + cur.DecidedBy + ")"
		}
		return cur, services.Errorf(services.ECONFLICT, "approval #%d was already decided: %s", id, how)
	}
	return a, wrapErr("transition approval", err)
}

// SetApprovalResume records the run resuming after run runID's approvals.
func (s *Store) SetApprovalResume(ctx context.Context, runID, resumeRunID int64) error {
	_, err := s.db.Exec(ctx, `UPDATE approvals SET resume_run_id = $2 WHERE run_id = $1 AND resume_run_id IS NULL AND NOT detached`, runID, resumeRunID)
	return wrapErr("set approval resume", err)
}
