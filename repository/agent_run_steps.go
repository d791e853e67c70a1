package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

// AppendStep records the next step of a run. The index is computed in the
// same statement; steps appended concurrently (parallel tool calls, a
// child's handoff) race for an index, and the loser, which ON CONFLICT DO
// NOTHING keeps from aborting its transaction, takes the next one.
func (s *Store) AppendStep(ctx context.Context, runID int64, kind services.StepKind, payload json.RawMessage) (services.Step, error) {
	return s.appendStep(ctx, runID, kind, payload, "append step", func(payload json.RawMessage) pgx.Row {
		return s.db.QueryRow(ctx, `
			INSERT INTO agent_run_steps (run_id, step_index, kind, payload)
			VALUES ($1, (SELECT COALESCE(max(step_index), -1) + 1 FROM agent_run_steps WHERE run_id = $1), $2, $3)
			ON CONFLICT (run_id, step_index) DO NOTHING
			RETURNING id, run_id, step_index, kind, payload, created_at`, runID, kind, payload)
	})
}

// maxAppendAttempts bounds the rounds one append may lose.
const maxAppendAttempts = 1000

// appendStep runs insert (a statement that appends the step at the next
// index, returning it, or nothing when another append took that index)
// until it wins an index.
func (s *Store) appendStep(ctx context.Context, runID int64, kind services.StepKind, payload json.RawMessage, what string,
	insert func(payload json.RawMessage) pgx.Row) (services.Step, error) {
	if kind == "" {
		return services.Step{}, services.Errorf(services.EINVALID, "step kind is empty")
	}
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	for attempt := 0; attempt < maxAppendAttempts; attempt++ {
		var st services.Step
		var raw []byte
		err := insert(payload).Scan(&st.ID, &st.RunID, &st.Index, &st.Kind, &raw, &st.CreatedAt)
		if err == pgx.ErrNoRows {
			// Another append took the index. Each round one of the
			// contenders wins, so with many (a model response with a
			// hundred parallel tool calls) a loser backs off a little,
			// at random, instead of losing the next rounds too.
			if attempt >= 4 {
				d := time.Duration(rand.Int64N(int64(min(attempt, 50))*int64(100*time.Microsecond)) + 1)
				select {
				case <-ctx.Done():
					return services.Step{}, ctx.Err()
				case <-time.After(d):
				}
			}
			continue
		}
		if err != nil {
			return services.Step{}, wrapErr(fmt.Sprintf("%s to run %d", what, runID), err)
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

// ToolActivity returns the tool calls of runs from their tool_call and
// tool_result steps, in call order, in one query. A call without a result
// yet is "running"; its duration is the time between the two steps.
func (s *Store) ToolActivity(ctx context.Context, runIDs []int64) (map[int64][]services.ToolUse, error) {
	out := map[int64][]services.ToolUse{}
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT run_id, kind, payload, created_at FROM agent_run_steps
		WHERE run_id = ANY($1) AND kind IN ('tool_call', 'tool_result') ORDER BY run_id, step_index`, runIDs)
	if err != nil {
		return nil, wrapErr("read tool activity", err)
	}
	defer rows.Close()
	type open struct {
		run int64
		i   int
		at  time.Time
	}
	calls := map[string]open{}
	for rows.Next() {
		var run int64
		var kind string
		var raw []byte
		var at time.Time
		if err := rows.Scan(&run, &kind, &raw, &at); err != nil {
			return nil, wrapErr("read tool activity", err)
		}
		switch services.StepKind(kind) {
		case services.StepToolCall:
			var c services.ToolCallStep
			if json.Unmarshal(raw, &c) != nil {
				continue
			}
			calls[fmt.Sprint(run, "/", c.ID)] = open{run: run, i: len(out[run]), at: at}
			out[run] = append(out[run], services.ToolUse{ID: c.ID, Name: c.Name, Arg: services.ToolArg(c.Arguments), Status: "running"})
		case services.StepToolResult:
			var r services.ToolResultStep
			if json.Unmarshal(raw, &r) != nil {
				continue
			}
			o, ok := calls[fmt.Sprint(run, "/", r.ID)]
			if !ok {
				continue
			}
			u := &out[run][o.i]
			u.Status, u.Code, u.DurationMS = "ok", "", at.Sub(o.at).Milliseconds()
			if r.IsError {
				u.Status, u.Code = "error", r.Code
			}
		}
	}
	return out, wrapErr("read tool activity", rows.Err())
}
