package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var _ services.ContextStore = (*Store)(nil)

const segmentColumns = `id, timeline_scope, scope, kind, from_message_id, until_message_id, summary_text,
	token_count, COALESCE(focus, ''), tainted_by, created_at`

func scanSegment(row pgx.Row) (services.Segment, error) {
	var s services.Segment
	err := row.Scan(&s.ID, &s.TimelineScope, &s.Scope, &s.Kind, &s.FromMessageID, &s.UntilMessageID,
		&s.SummaryText, &s.TokenCount, &s.Focus, &s.TaintedBy, &s.CreatedAt)
	return s, err
}

// ListSegments returns the segments of (timeline, scope) after the last reset.
func (s *Store) ListSegments(ctx context.Context, timelineScope, scope string) ([]services.Segment, error) {
	rows, err := s.db.Query(ctx, `
		SELECT `+segmentColumns+` FROM chat_summary_segments
		WHERE timeline_scope = $1 AND scope = $2 AND kind = 'summary'
		  AND id > COALESCE((SELECT max(id) FROM chat_summary_segments
		                     WHERE timeline_scope = $1 AND scope = $2 AND kind = 'reset'), 0)
		ORDER BY id`, timelineScope, scope)
	if err != nil {
		return nil, wrapErr(fmt.Sprintf("list segments %q/%q", timelineScope, scope), err)
	}
	defer rows.Close()
	var out []services.Segment
	for rows.Next() {
		seg, err := scanSegment(rows)
		if err != nil {
			return nil, wrapErr("list segments", err)
		}
		out = append(out, seg)
	}
	return out, wrapErr("list segments", rows.Err())
}

// AppendSegment stores a segment and moves the cursor in one transaction.
func (s *Store) AppendSegment(ctx context.Context, seg services.Segment) (services.Segment, error) {
	if seg.TimelineScope == "" || seg.Scope == "" {
		return services.Segment{}, services.Errorf(services.EINVALID, "segment needs a timeline and a scope")
	}
	if seg.Kind == "" {
		seg.Kind = services.SegmentSummary
	}
	var out services.Segment
	err := s.transact(ctx, func(txs *Tx) error {
		if seg.Kind == services.SegmentSummary {
			// A summary starts after the cursor: two compactions of the
			// same turns (a /compact racing a compaction job, a job rerun
			// after a crash) store one summary, not two. The cursor row is
			// locked so the check and the move are one step.
			var cursor int64
			err := txs.db.QueryRow(ctx, `SELECT until_message_id FROM chat_context_summaries
				WHERE timeline_scope = $1 AND scope = $2 FOR UPDATE`, seg.TimelineScope, seg.Scope).Scan(&cursor)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return wrapErr("append segment", err)
			}
			if err == nil && cursor >= seg.FromMessageID {
				return services.Errorf(services.ECONFLICT, "summary cursor %q/%q is already at message %d; this summary starts at %d",
					seg.TimelineScope, seg.Scope, cursor, seg.FromMessageID)
			}
		}
		var err error
		out, err = scanSegment(txs.db.QueryRow(ctx, `
			INSERT INTO chat_summary_segments (timeline_scope, scope, kind, from_message_id, until_message_id,
				summary_text, token_count, focus, tainted_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, NULLIF($8, ''), $9)
			RETURNING `+segmentColumns,
			seg.TimelineScope, seg.Scope, seg.Kind, seg.FromMessageID, seg.UntilMessageID, seg.SummaryText, seg.TokenCount, seg.Focus, seg.TaintedBy))
		if err != nil {
			return wrapErr("append segment", err)
		}
		_, err = txs.UpsertSummary(ctx, services.Summary{TimelineScope: seg.TimelineScope, Scope: seg.Scope,
			UntilMessageID: seg.UntilMessageID, SummaryText: seg.SummaryText})
		return err
	})
	return out, err
}

// searchSegments ranks the summary segments of the view's summary scopes
// (every segment, also those before a reset: /new stops sending them, the
// archive keeps them).
func (s *Store) searchSegments(ctx context.Context, q services.RecallQuery) ([]services.RecallHit, error) {
	rows, err := s.db.Query(ctx, `
		WITH q AS (SELECT websearch_to_tsquery('simple', $3) AS q),
		hits AS (
			SELECT id, ts_rank_cd(to_tsvector('simple', summary_text), q.q, 32) AS score
			FROM chat_summary_segments, q
			WHERE to_tsvector('simple', summary_text) @@ q.q
			  AND timeline_scope = $1 AND scope = ANY($2) AND kind = 'summary'
			  AND ($4::timestamptz IS NULL OR created_at >= $4)
			  AND ($5::timestamptz IS NULL OR created_at < $5)
			ORDER BY score DESC, id DESC LIMIT $6
		)
		SELECT g.id, g.scope, g.created_at,
			ts_headline('simple', g.summary_text, q.q, 'MaxWords=24, MinWords=8, MaxFragments=1, StartSel=**, StopSel=**'),
			g.token_count, length(g.summary_text), hits.score, g.from_message_id, g.until_message_id
		FROM hits JOIN chat_summary_segments g ON g.id = hits.id, q
		ORDER BY hits.score DESC, g.id DESC`, pgx.QueryExecModeExec,
		q.View.TimelineScope, q.View.SummaryScopes, recallTSQuery(q), timeArg(q.After), timeArg(q.Before), q.Limit)
	if err != nil {
		return nil, wrapErr("search summaries", err)
	}
	defer rows.Close()
	var out []services.RecallHit
	for rows.Next() {
		h := services.RecallHit{Kind: services.RecallSummary, Role: services.RoleSystem}
		var chars int
		if err := rows.Scan(&h.ID, &h.ContextScope, &h.CreatedAt, &h.Snippet, &h.Tokens, &chars, &h.Score, &h.FromID, &h.UntilID); err != nil {
			return nil, wrapErr("search summaries", err)
		}
		if h.Tokens == 0 {
			h.Tokens = chars/4 + 1
		}
		h.Snippet = strings.Join(strings.Fields(h.Snippet), " ")
		out = append(out, h)
	}
	return out, wrapErr("search summaries", rows.Err())
}

// RecallSegments returns the summary segments of ids within v.
func (s *Store) RecallSegments(ctx context.Context, v services.RecallView, ids []int64) ([]services.Segment, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT `+segmentColumns+` FROM chat_summary_segments
		WHERE id = ANY($3) AND timeline_scope = $1 AND scope = ANY($2) AND kind = 'summary'
		ORDER BY id`, v.TimelineScope, v.SummaryScopes, ids)
	if err != nil {
		return nil, wrapErr("recall summaries", err)
	}
	defer rows.Close()
	var out []services.Segment
	for rows.Next() {
		seg, err := scanSegment(rows)
		if err != nil {
			return nil, wrapErr("recall summaries", err)
		}
		out = append(out, seg)
	}
	return out, wrapErr("recall summaries", rows.Err())
}
