package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/services"
)

// ReadPromptSources implements services.PromptSourceReader: what
// ContextBudget, ListConstraints, ListMemory, GetSummary (without its
// text) and ListSegments read, in one statement, each part as JSON.
func (s *Store) ReadPromptSources(ctx context.Context, timelineScope, scope string) (services.PromptSources, error) {
	var budget, rules, memory, cursor, segments []byte
	err := s.db.QueryRow(ctx, `
		SELECT
			(SELECT json_build_object('version', version, 'profile', profile)
			 FROM context_budgets WHERE timeline_scope = $1),
			(SELECT json_agg(json_build_object('id', c.id, 'timeline', c.timeline_scope, 'text', c.text, 'hard', c.hard,
				'check', c.check_pattern, 'version', c.version, 'updated_at', c.updated_at,
				'proposed', EXISTS (SELECT 1 FROM rule_proposals p WHERE p.constraint_id = c.id)) ORDER BY c.id)
			 FROM context_constraints c WHERE c.timeline_scope = $1),
			(SELECT json_agg(json_build_object('id', id, 'timeline', timeline_scope, 'key', key, 'value', value,
				'confidence', confidence::float8, 'source', source, 'version', version, 'updated_at', updated_at,
				'run_id', COALESCE(run_id, 0), 'origin', COALESCE(origin, '')) ORDER BY confidence DESC, id)
			 FROM memory_items WHERE timeline_scope = $1 AND forgotten_at IS NULL),
			(SELECT json_build_object('until', until_message_id, 'updated_at', updated_at)
			 FROM chat_context_summaries WHERE timeline_scope = $1 AND scope = $2),
			(SELECT json_agg(json_build_object('id', id, 'timeline', timeline_scope, 'scope', scope, 'kind', kind,
				'from', from_message_id, 'until', until_message_id, 'text', summary_text, 'tokens', token_count,
				'focus', COALESCE(focus, ''), 'tainted_by', tainted_by, 'created_at', created_at) ORDER BY id)
			 FROM chat_summary_segments
			 WHERE timeline_scope = $1 AND scope = $2 AND kind = 'summary'
			   AND id > COALESCE((SELECT max(id) FROM chat_summary_segments
			                      WHERE timeline_scope = $1 AND scope = $2 AND kind = 'reset'), 0))`,
		timelineScope, scope).Scan(&budget, &rules, &memory, &cursor, &segments)
	if err != nil {
		return services.PromptSources{}, wrapErr(fmt.Sprintf("read prompt sources %q/%q", timelineScope, scope), err)
	}
	out := services.PromptSources{Budget: services.DefaultContextBudget()}
	if budget != nil {
		var b struct {
			Version int             `json:"version"`
			Profile json.RawMessage `json:"profile"`
		}
		if err := json.Unmarshal(budget, &b); err != nil {
			return out, wrapErr("read prompt sources: budget profile", err)
		}
		out.Budget, out.BudgetErr = budgetProfile(b.Version, b.Profile)
	}
	var rs []struct {
		ID        int64     `json:"id"`
		Timeline  string    `json:"timeline"`
		Text      string    `json:"text"`
		Hard      bool      `json:"hard"`
		Check     string    `json:"check"`
		Version   int       `json:"version"`
		UpdatedAt time.Time `json:"updated_at"`
		Proposed  bool      `json:"proposed"`
	}
	var ms []struct {
		ID         int64     `json:"id"`
		Timeline   string    `json:"timeline"`
		Key        string    `json:"key"`
		Value      string    `json:"value"`
		Confidence float64   `json:"confidence"`
		Source     string    `json:"source"`
		Version    int       `json:"version"`
		UpdatedAt  time.Time `json:"updated_at"`
		RunID      int64     `json:"run_id"`
		Origin     string    `json:"origin"`
	}
	var cur struct {
		Until     int64     `json:"until"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	var ss []struct {
		ID        int64     `json:"id"`
		Timeline  string    `json:"timeline"`
		Scope     string    `json:"scope"`
		Kind      string    `json:"kind"`
		From      int64     `json:"from"`
		Until     int64     `json:"until"`
		Text      string    `json:"text"`
		Tokens    int       `json:"tokens"`
		Focus     string    `json:"focus"`
		TaintedBy string    `json:"tainted_by"`
		CreatedAt time.Time `json:"created_at"`
	}
	for _, part := range []struct {
		raw []byte
		v   any
	}{{rules, &rs}, {memory, &ms}, {cursor, &cur}, {segments, &ss}} {
		if part.raw == nil {
			continue
		}
		if err := json.Unmarshal(part.raw, part.v); err != nil {
			return services.PromptSources{}, wrapErr("read prompt sources", err)
		}
	}
	for _, r := range rs {
		out.Rules = append(out.Rules, services.Constraint{ID: r.ID, TimelineScope: r.Timeline, Text: r.Text, Hard: r.Hard,
			Check: r.Check, Version: r.Version, UpdatedAt: r.UpdatedAt, Proposed: r.Proposed})
	}
	for _, m := range ms {
		out.Memory = append(out.Memory, services.MemoryItem{ID: m.ID, TimelineScope: m.Timeline, Key: m.Key, Value: m.Value,
			Confidence: m.Confidence, Source: m.Source, Version: m.Version, UpdatedAt: m.UpdatedAt, RunID: m.RunID, Origin: m.Origin})
	}
	if cursor != nil {
		out.Summary = services.Summary{TimelineScope: timelineScope, Scope: scope, UntilMessageID: cur.Until, UpdatedAt: cur.UpdatedAt}
	}
	for _, g := range ss {
		out.Segments = append(out.Segments, services.Segment{ID: g.ID, TimelineScope: g.Timeline, Scope: g.Scope, Kind: g.Kind,
			FromMessageID: g.From, UntilMessageID: g.Until, SummaryText: g.Text, TokenCount: g.Tokens, Focus: g.Focus,
			TaintedBy: g.TaintedBy, CreatedAt: g.CreatedAt})
	}
	return out, nil
}
