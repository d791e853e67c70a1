package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var _ services.RunRequests = (*Store)(nil)

// AppendStepWithRequest records the next step of a run and the request
// behind it in one statement (one round trip, one implicit transaction):
// the step as AppendStep does, the request pointing at it.
func (s *Store) AppendStepWithRequest(ctx context.Context, runID int64, kind services.StepKind, payload json.RawMessage, req services.RunRequest) (services.Step, error) {
	return s.appendStep(ctx, runID, kind, payload, "append step with request", func(payload json.RawMessage) pgx.Row {
		return s.db.QueryRow(ctx, `
			WITH st AS (
				INSERT INTO agent_run_steps (run_id, step_index, kind, payload)
				VALUES ($1, (SELECT COALESCE(max(step_index), -1) + 1 FROM agent_run_steps WHERE run_id = $1), $2, $3)
				ON CONFLICT (run_id, step_index) DO NOTHING
				RETURNING id, run_id, step_index, kind, payload, created_at
			), rq AS (
				INSERT INTO run_requests (run_id, step_id, timeline_scope, context_scope, provider, model, url, body_bytes, body_gzip)
				SELECT st.run_id, st.id, $4, $5, $6, $7, $8, $9, $10 FROM st
			)
			SELECT id, run_id, step_index, kind, payload, created_at FROM st`,
			runID, kind, payload, req.TimelineScope, req.ContextScope, req.Provider, req.Model, req.URL, req.Bytes, req.Gzip)
	})
}

const runRequestColumns = `q.id, q.run_id, q.step_id, s.step_index, q.timeline_scope, q.context_scope, q.provider, q.model, q.url, q.body_bytes, q.created_at`

func scanRunRequest(row pgx.Row, body bool) (services.RunRequest, error) {
	var r services.RunRequest
	dst := []any{&r.ID, &r.RunID, &r.StepID, &r.StepIndex, &r.TimelineScope, &r.ContextScope, &r.Provider, &r.Model, &r.URL, &r.Bytes, &r.CreatedAt}
	if body {
		dst = append(dst, &r.Gzip)
	}
	return r, row.Scan(dst...)
}

// ListRunRequests lists stored requests without their bodies, newest
// first: of one run (RunID), or of one timeline and context scope.
func (s *Store) ListRunRequests(ctx context.Context, q services.RunRequestQuery) ([]services.RunRequest, error) {
	if q.RunID == 0 && (q.TimelineScope == "" || q.ContextScope == "") {
		return nil, services.Errorf(services.EINVALID, "list requests needs a run id, or a timeline and a context scope")
	}
	if q.Limit <= 0 || q.Limit > 500 {
		q.Limit = 100
	}
	if q.BeforeID <= 0 {
		q.BeforeID = 1<<63 - 1
	}
	where := `q.run_id = $3`
	args := []any{q.BeforeID, q.Limit, q.RunID}
	if q.RunID == 0 {
		where = `q.timeline_scope = $3 AND q.context_scope = $4`
		args = []any{q.BeforeID, q.Limit, q.TimelineScope, q.ContextScope}
	}
	rows, err := s.db.Query(ctx, `SELECT `+runRequestColumns+` FROM run_requests q JOIN agent_run_steps s ON s.id = q.step_id
		WHERE `+where+` AND q.id < $1 ORDER BY q.id DESC LIMIT $2`, args...)
	if err != nil {
		return nil, wrapErr("list run requests", err)
	}
	defer rows.Close()
	var out []services.RunRequest
	for rows.Next() {
		r, err := scanRunRequest(rows, false)
		if err != nil {
			return nil, wrapErr("list run requests", err)
		}
		out = append(out, r)
	}
	return out, wrapErr("list run requests", rows.Err())
}

// GetRunRequest returns one stored request with its compressed body.
func (s *Store) GetRunRequest(ctx context.Context, id int64) (services.RunRequest, error) {
	r, err := scanRunRequest(s.db.QueryRow(ctx, `SELECT `+runRequestColumns+`, q.body_gzip FROM run_requests q
		JOIN agent_run_steps s ON s.id = q.step_id WHERE q.id = $1`, id), true)
	if err != nil {
		return services.RunRequest{}, wrapErr(fmt.Sprintf("request %d", id), err)
	}
	return r, nil
}

// PruneRunRequests deletes requests stored before t.
func (s *Store) PruneRunRequests(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM run_requests WHERE created_at < $1`, before)
	if err != nil {
		return 0, wrapErr("prune run requests", err)
	}
	return tag.RowsAffected(), nil
}
