package repository

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

const messageColumns = `id, timeline_scope, context_scope, COALESCE(agent_id, ''), role, source,
	content, visible, metadata, COALESCE(dedupe_key, ''), COALESCE(token_count, 0), created_at`

func scanMessage(row pgx.Row) (services.Message, error) {
	var m services.Message
	var visible int16
	var meta []byte
	err := row.Scan(&m.ID, &m.TimelineScope, &m.ContextScope, &m.AgentID, &m.Role, &m.Source,
		&m.Content, &visible, &meta, &m.DedupeKey, &m.TokenCount, &m.CreatedAt)
	m.Visible = visible == 1
	m.Metadata = json.RawMessage(meta)
	return m, err
}

func collectMessages(rows pgx.Rows, err error) ([]services.Message, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []services.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

var validRoles = map[services.Role]bool{
	services.RoleUser: true, services.RoleAssistant: true, services.RoleSystem: true, services.RoleTool: true,
}

// InsertMessage stores a message; see services.ChatStore. Empty scopes take
// the column defaults, so legacy callers behave as before Phase 1.
func (s *Store) InsertMessage(ctx context.Context, m services.NewMessage) (services.Message, bool, error) {
	if !validRoles[m.Role] {
		return services.Message{}, false, services.Errorf(services.EINVALID, "message role %q is not one of user, assistant, system, tool", m.Role)
	}
	if m.Source == "" {
		return services.Message{}, false, services.Errorf(services.EINVALID, "message source is empty")
	}
	meta := m.Metadata
	if len(meta) == 0 {
		meta = json.RawMessage(`{}`)
	}
	visible := int16(0)
	if m.Visible {
		visible = 1
	}
	// The transaction-scoped advisory lock on the timeline serialises inserts
	// into one timeline, so ids commit in id order and a reader tailing "rows
	// after the last id I saw" never skips a row that commits late. It is
	// taken in the same statement (one round trip) and released at commit.
	// ON CONFLICT DO NOTHING + re-read keeps the insert idempotent on the
	// dedupe key without aborting the caller's transaction.
	row := s.db.QueryRow(ctx, `
		WITH timeline_lock AS (
			SELECT pg_advisory_xact_lock(`+timelineLockKey+`, hashtext(current_schema() || '/' || COALESCE(NULLIF($1, ''), 'global')))
		)
		INSERT INTO chat_messages (timeline_scope, context_scope, agent_id, role, source, content,
			visible, metadata, dedupe_key, token_count)
		SELECT COALESCE(NULLIF($1, ''), 'global'), COALESCE(NULLIF($2, ''), 'main'), NULLIF($3, ''),
			$4, $5, $6, $7, $8, NULLIF($9, ''), NULLIF($10, 0)::integer
		FROM timeline_lock
		ON CONFLICT (timeline_scope, source, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
		RETURNING `+messageColumns,
		m.TimelineScope, m.ContextScope, m.AgentID, m.Role, m.Source, m.Content,
		visible, meta, m.DedupeKey, m.TokenCount)
	msg, err := scanMessage(row)
	if err == nil {
		return msg, true, nil
	}
	if err != pgx.ErrNoRows || m.DedupeKey == "" {
		return services.Message{}, false, wrapErr("insert message", err)
	}
	timeline := m.TimelineScope
	if timeline == "" {
		timeline = services.DefaultTimeline
	}
	msg, err = scanMessage(s.db.QueryRow(ctx, `
		SELECT `+messageColumns+` FROM chat_messages
		WHERE timeline_scope = $1 AND source = $2 AND dedupe_key = $3`, timeline, m.Source, m.DedupeKey))
	if err != nil {
		return services.Message{}, false, wrapErr(fmt.Sprintf("find message by dedupe key %q", m.DedupeKey), err)
	}
	return msg, false, nil
}

// GetMessage returns one message by id.
func (s *Store) GetMessage(ctx context.Context, id int64) (services.Message, error) {
	m, err := scanMessage(s.db.QueryRow(ctx, `SELECT `+messageColumns+` FROM chat_messages WHERE id = $1`, id))
	if err != nil {
		return services.Message{}, wrapErr(fmt.Sprintf("get message %d", id), err)
	}
	return m, nil
}

// timelineLockKey is the first key of the per-timeline advisory lock; the
// second is a hash of schema and timeline (advisory locks are per database,
// and deployments or tests may share one database in several schemas).
const timelineLockKey = "7301"

// LatestID returns the newest visible message id of a timeline, 0 when empty.
func (s *Store) LatestID(ctx context.Context, timelineScope string) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `
		SELECT COALESCE((SELECT id FROM chat_messages WHERE timeline_scope = $1 AND visible = 1
		ORDER BY id DESC LIMIT 1), 0)`, timelineScope).Scan(&id)
	return id, wrapErr(fmt.Sprintf("latest id of %q", timelineScope), err)
}

// After returns visible rows of a timeline after an id (the events.Rows
// interface of the hub).
func (s *Store) After(ctx context.Context, timelineScope string, afterID int64, limit int) ([]services.Message, error) {
	return s.ListTimeline(ctx, services.TimelineQuery{TimelineScope: timelineScope, AfterID: afterID, Limit: limit})
}

func clampLimit(n int) int {
	if n <= 0 || n > 1000 {
		return 1000
	}
	return n
}

// ListTimeline returns a keyset page of a timeline, ascending by id. It uses
// idx_chat_messages_timeline_scope_id.
func (s *Store) ListTimeline(ctx context.Context, q services.TimelineQuery) ([]services.Message, error) {
	if q.TimelineScope == "" {
		return nil, services.Errorf(services.EINVALID, "timeline scope is empty")
	}
	limit := clampLimit(q.Limit)
	var rows pgx.Rows
	var err error
	if q.BeforeID > 0 {
		// Newest page before the id, flipped back to ascending.
		rows, err = s.db.Query(ctx, `
			SELECT * FROM (
				SELECT `+messageColumns+` FROM chat_messages
				WHERE timeline_scope = $1 AND id < $2 AND id > $3 AND (visible = 1 OR $4)
				ORDER BY id DESC LIMIT $5
			) page ORDER BY id`, q.TimelineScope, q.BeforeID, q.AfterID, q.IncludeHidden, limit)
	} else {
		rows, err = s.db.Query(ctx, `
			SELECT `+messageColumns+` FROM chat_messages
			WHERE timeline_scope = $1 AND id > $2 AND (visible = 1 OR $3)
			ORDER BY id LIMIT $4`, q.TimelineScope, q.AfterID, q.IncludeHidden, limit)
	}
	msgs, err := collectMessages(rows, err)
	return msgs, wrapErr(fmt.Sprintf("list timeline %q", q.TimelineScope), err)
}

// ListContext returns messages of one (timeline, context scope) after a
// cursor, ascending. With ByTimelineOnly it reads the timeline's visible rows
// (the legacy path).
func (s *Store) ListContext(ctx context.Context, q services.ContextQuery) ([]services.Message, error) {
	if q.TimelineScope == "" {
		return nil, services.Errorf(services.EINVALID, "timeline scope is empty")
	}
	limit := clampLimit(q.Limit)
	var rows pgx.Rows
	var err error
	before := q.BeforeID
	if before <= 0 {
		before = 1<<63 - 1
	}
	// Newest rows first within (after, before), flipped back to ascending;
	// with no BeforeID and the oldest-first need, the plain ascending form.
	switch {
	case q.ByTimelineOnly && q.BeforeID > 0:
		rows, err = s.db.Query(ctx, `
			SELECT * FROM (SELECT `+messageColumns+` FROM chat_messages
			WHERE timeline_scope = $1 AND id > $2 AND id < $3 AND visible = 1
			ORDER BY id DESC LIMIT $4) page ORDER BY id`, q.TimelineScope, q.AfterID, before, limit)
	case q.ByTimelineOnly:
		rows, err = s.db.Query(ctx, `
			SELECT `+messageColumns+` FROM chat_messages
			WHERE timeline_scope = $1 AND id > $2 AND visible = 1
			ORDER BY id LIMIT $3`, q.TimelineScope, q.AfterID, limit)
	case q.ContextScope == "":
		return nil, services.Errorf(services.EINVALID, "context scope is empty")
	case q.BeforeID > 0:
		rows, err = s.db.Query(ctx, `
			SELECT * FROM (SELECT `+messageColumns+` FROM chat_messages
			WHERE timeline_scope = $1 AND context_scope = $2 AND id > $3 AND id < $4
			ORDER BY id DESC LIMIT $5) page ORDER BY id`, q.TimelineScope, q.ContextScope, q.AfterID, before, limit)
	default:
		rows, err = s.db.Query(ctx, `
			SELECT `+messageColumns+` FROM chat_messages
			WHERE timeline_scope = $1 AND context_scope = $2 AND id > $3
			ORDER BY id LIMIT $4`, q.TimelineScope, q.ContextScope, q.AfterID, limit)
	}
	msgs, err := collectMessages(rows, err)
	return msgs, wrapErr(fmt.Sprintf("list context %q/%q", q.TimelineScope, q.ContextScope), err)
}
