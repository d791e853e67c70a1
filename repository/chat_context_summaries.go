package repository

import (
	"context"
	"fmt"

	"github.com/switchboard/switchboard/services"
)

// GetSummary returns the summary cursor of (timeline, scope).
func (s *Store) GetSummary(ctx context.Context, timelineScope, scope string) (services.Summary, error) {
	var sum services.Summary
	err := s.db.QueryRow(ctx, `
		SELECT timeline_scope, scope, until_message_id, summary_text, updated_at
		FROM chat_context_summaries WHERE timeline_scope = $1 AND scope = $2`,
		timelineScope, scope).Scan(&sum.TimelineScope, &sum.Scope, &sum.UntilMessageID, &sum.SummaryText, &sum.UpdatedAt)
	if err != nil {
		return services.Summary{}, wrapErr(fmt.Sprintf("get summary %q/%q", timelineScope, scope), err)
	}
	return sum, nil
}

// UpsertSummary creates or moves the cursor row of (timeline, scope). A cursor
// never moves backwards: an older until_message_id is refused with ECONFLICT.
func (s *Store) UpsertSummary(ctx context.Context, in services.Summary) (services.Summary, error) {
	if in.TimelineScope == "" || in.Scope == "" {
		return services.Summary{}, services.Errorf(services.EINVALID, "summary needs a timeline scope and a scope")
	}
	var out services.Summary
	err := s.db.QueryRow(ctx, `
		INSERT INTO chat_context_summaries (timeline_scope, scope, until_message_id, summary_text, updated_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (timeline_scope, scope) DO UPDATE
			SET until_message_id = EXCLUDED.until_message_id,
			    summary_text = EXCLUDED.summary_text,
			    updated_at = now()
			WHERE chat_context_summaries.until_message_id <= EXCLUDED.until_message_id
		RETURNING timeline_scope, scope, until_message_id, summary_text, updated_at`,
		in.TimelineScope, in.Scope, in.UntilMessageID, in.SummaryText).
		Scan(&out.TimelineScope, &out.Scope, &out.UntilMessageID, &out.SummaryText, &out.UpdatedAt)
	if err != nil {
		if services.IsKind(wrapErr("", err), services.ENOTFOUND) {
			return services.Summary{}, services.Errorf(services.ECONFLICT,
				"summary cursor %q/%q is already past message %d", in.TimelineScope, in.Scope, in.UntilMessageID)
		}
		return services.Summary{}, wrapErr(fmt.Sprintf("upsert summary %q/%q", in.TimelineScope, in.Scope), err)
	}
	return out, nil
}
