package repository

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

// AppendStep records the next step of a run. The index is computed in the
// same statement; steps appended concurrently (parallel tool calls, a
// child's handoff) race for an index, and the loser, which ON CONFLICT DO
// NOTHING keeps from aborting its transaction, takes the next one.
func (s *Store) AppendStep(ctx context.Context, runID int64, kind services.StepKind, payload json.RawMessage) (services.Step, error) {
	if kind == "" {
		return services.Step{}, services.Errorf(services.EINVALID, "step kind is empty")
	}
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	for attempt := 0; attempt < 50; attempt++ {
		var st services.Step
		var raw []byte
		err := s.db.QueryRow(ctx, `
			INSERT INTO agent_run_steps (run_id, step_index, kind, payload)
			VALUES ($1, (SELECT COALESCE(max(step_index), -1) + 1 FROM agent_run_steps WHERE run_id = $1), $2, $3)
			ON CONFLICT (run_id, step_index) DO NOTHING
			RETURNING id, run_id, step_index, kind, payload, created_at`, runID, kind, payload).
			Scan(&st.ID, &st.RunID, &st.Index, &st.Kind, &raw, &st.CreatedAt)
		if err == pgx.ErrNoRows {
			continue
		}
		if err != nil {
			return services.Step{}, wrapErr(fmt.Sprintf("append step to run %d", runID), err)
		}
		st.Payload = raw
		return st, nil
	}
	return services.Step{}, services.Errorf(services.ECONFLICT, "append step to run %d: too many concurrent appends", runID)
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
