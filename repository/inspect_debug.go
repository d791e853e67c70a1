package repository

import (
	"context"
	"fmt"

	"github.com/switchboard/switchboard/services"
)

// SummaryCursors lists the summary cursors of a timeline (every timeline
// when timelineScope is empty) with their lag, computed like the
// summary_cursor_lag query of repository/inspect.sql: the legacy 'global'
// summary covers the visible timeline, any other scope its own rows.
func (s *Store) SummaryCursors(ctx context.Context, timelineScope string) ([]services.SummaryCursor, error) {
	rows, err := s.db.Query(ctx, `
		SELECT s.timeline_scope, s.scope, s.until_message_id, s.summary_text, lag.messages, lag.tokens, s.updated_at
		FROM chat_context_summaries s
		CROSS JOIN LATERAL (
			SELECT count(*) AS messages, COALESCE(sum(m.token_count), 0)::bigint AS tokens
			FROM chat_messages m
			WHERE m.timeline_scope = s.timeline_scope
			  AND m.id > s.until_message_id
			  AND CASE WHEN s.scope = 'global' THEN m.visible = 1 ELSE m.context_scope = s.scope END
		) AS lag
		WHERE $1 = '' OR s.timeline_scope = $1
		ORDER BY s.timeline_scope, s.scope
		LIMIT 500`, timelineScope)
	if err != nil {
		return nil, wrapErr(fmt.Sprintf("summary cursors of %q", timelineScope), err)
	}
	defer rows.Close()
	var out []services.SummaryCursor
	for rows.Next() {
		var c services.SummaryCursor
		if err := rows.Scan(&c.TimelineScope, &c.Scope, &c.UntilMessageID, &c.SummaryText, &c.LagMessages, &c.LagTokens, &c.UpdatedAt); err != nil {
			return nil, wrapErr("summary cursors", err)
		}
		out = append(out, c)
	}
	return out, wrapErr("summary cursors", rows.Err())
}
