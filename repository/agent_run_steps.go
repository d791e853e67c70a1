package repository

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchboard/switchboard/services"
)

// AppendStep records the next step of a run. The index is computed in the
// same statement; the unique (run_id, step_index) key turns a concurrent
// append into ECONFLICT rather than a duplicate index.
func (s *Store) AppendStep(ctx context.Context, runID int64, kind string, payload json.RawMessage) (services.Step, error) {
	if kind == "" {
		return services.Step{}, services.Errorf(services.EINVALID, "step kind is empty")
	}
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	var st services.Step
	var raw []byte
	err := s.db.QueryRow(ctx, `
		INSERT INTO agent_run_steps (run_id, step_index, kind, payload)
		VALUES ($1, (SELECT COALESCE(max(step_index), -1) + 1 FROM agent_run_steps WHERE run_id = $1), $2, $3)
		RETURNING id, run_id, step_index, kind, payload, created_at`, runID, kind, payload).
		Scan(&st.ID, &st.RunID, &st.Index, &st.Kind, &raw, &st.CreatedAt)
	if err != nil {
		return services.Step{}, wrapErr(fmt.Sprintf("append step to run %d", runID), err)
	}
	st.Payload = raw
	return st, nil
}

// ListSteps returns a run's steps in order.
func (s *Store) ListSteps(ctx context.Context, runID int64) ([]services.Step, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, run_id, step_index, kind, payload, created_at
		FROM agent_run_steps WHERE run_id = $1 ORDER BY step_index`, runID)
	if err != nil {
		return nil, wrapErr(fmt.Sprintf("list steps of run %d", runID), err)
	}
	defer rows.Close()
	var out []services.Step
	for rows.Next() {
		var st services.Step
		var raw []byte
		if err := rows.Scan(&st.ID, &st.RunID, &st.Index, &st.Kind, &raw, &st.CreatedAt); err != nil {
			return nil, wrapErr(fmt.Sprintf("list steps of run %d", runID), err)
		}
		st.Payload = raw
		out = append(out, st)
	}
	return out, wrapErr(fmt.Sprintf("list steps of run %d", runID), rows.Err())
}
