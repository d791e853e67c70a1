package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

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
	if err == nil {
		// Decoded once here; metadata that does not decode reads as empty.
		m.Meta, _ = services.DecodeMeta(m.Metadata)
	}
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

// ToolResultMessage returns the hidden row holding the result of tool call
// callID of run runID in timeline. The run's rows come after its trigger, so
// the scan starts there (idx_chat_messages_timeline_scope_id).
func (s *Store) ToolResultMessage(ctx context.Context, timeline string, runID int64, callID string) (services.Message, error) {
	m, err := scanMessage(s.db.QueryRow(ctx, `
		SELECT `+messageColumns+` FROM chat_messages
		WHERE timeline_scope = $1
		  AND id > COALESCE((SELECT trigger_message_id FROM agent_runs WHERE id = $2 AND timeline_scope = $1), 0)
		  AND role = 'tool' AND metadata->>'run_id' = $2::text AND metadata->>'tool_call_id' = $3
		ORDER BY id LIMIT 1`, timeline, runID, callID))
	if err != nil {
		return services.Message{}, wrapErr(fmt.Sprintf("result of tool call %q of run %d", callID, runID), err)
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

var _ services.RecallStore = (*Store)(nil)

// recallVector is the indexed expression of idx_chat_messages_fts: a query
// must spell it exactly so for the planner to use the index.
const recallVector = `to_tsvector('simple', left(content, 100000))`

// recallView is the WHERE clause of services.RecallView for chat_messages
// ($1 timeline, $2 context scope), with the rows never recalled left out.
// Main's view is its own scope (every visible row is a main row); any other
// scope reads its own rows, main's visible ones and the handoffs main got.
const recallView = `timeline_scope = $1
	AND (context_scope = $2 OR (context_scope = 'main' AND (visible = 1 OR metadata->>'kind' = 'handoff')))
	AND source <> 'system' AND metadata->>'command' IS NULL
	AND COALESCE(metadata->>'notice', '') <> '` + services.NoticeOfflineModel + `'
	AND NOT (visible = 1 AND COALESCE(metadata->>'kind', '') = 'handoff')`

// recallTSQuery is the tsquery of a RecallQuery for websearch_to_tsquery:
// the terms (letters and digits only) joined by spaces (all must match) or
// "or" (any).
func recallTSQuery(q services.RecallQuery) string {
	sep := " "
	if q.AnyTerm {
		sep = " or "
	}
	return strings.Join(q.Terms, sep)
}

func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// SearchRecall searches a timeline's archive (messages and summary
// segments) within q.View, best first.
func (s *Store) SearchRecall(ctx context.Context, q services.RecallQuery) ([]services.RecallHit, error) {
	if q.View.TimelineScope == "" || q.View.ContextScope == "" {
		return nil, services.Errorf(services.EINVALID, "recall needs a timeline and a context scope")
	}
	if len(q.Terms) == 0 {
		return nil, services.Errorf(services.EINVALID, "the search has no words to look for")
	}
	if q.Limit <= 0 || q.Limit > 100 {
		q.Limit = 100
	}
	if q.AnyTerm && len(q.Terms) > 1 {
		terms, err := s.rarerTerms(ctx, q.Terms)
		if err != nil {
			return nil, err
		}
		q.Terms = terms
	}
	var hits []services.RecallHit
	if q.Kind != services.RecallSummary {
		h, err := s.searchMessages(ctx, q)
		if err != nil {
			return nil, err
		}
		hits = h
	}
	if q.Kind != services.RecallMessage && !q.HandoffsOnly && len(q.View.SummaryScopes) > 0 {
		h, err := s.searchSegments(ctx, q)
		if err != nil {
			return nil, err
		}
		hits = append(hits, h...)
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].CreatedAt.After(hits[j].CreatedAt)
	})
	if len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	return hits, nil
}

// recallHandoffCandidates is how many of the newest handoffs a
// HandoffsOnly search ranks, by their first 1,000 characters (the summary
// and the start of the result): every main prompt runs it.
const recallHandoffCandidates = 30

// commonTermFreq is the share of indexed rows above which a word is too
// common to widen an any-word search (the 'simple' index keeps every word).
const commonTermFreq = 0.05

// commonTermMinRows: in a smaller table every word is "common"; nothing is
// left out.
const commonTermMinRows = 20000

// rarerTerms leaves out of an any-word search the words that PostgreSQL's
// statistics of idx_chat_messages_fts (ANALYZE) find in more than
// commonTermFreq of the rows, when rarer words remain: each matching row of
// an any-word search is read, and a word in half the table would read half
// the table.
func (s *Store) rarerTerms(ctx context.Context, terms []string) ([]string, error) {
	common, err := s.commonTerms(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range terms {
		if !common[t] {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return terms, nil
	}
	return out, nil
}

// commonTermsTTL is how long the common words read from the statistics are
// kept (they change with ANALYZE, slowly).
const commonTermsTTL = 10 * time.Minute

var commonTermCache struct {
	sync.Mutex
	byDB map[any]commonTermEntry
}

type commonTermEntry struct {
	at  time.Time
	set map[string]bool
}

// commonTerms are the words in more than commonTermFreq of the indexed
// rows, read from pg_stats at most once per commonTermsTTL per database
// handle (reading them costs a few milliseconds).
func (s *Store) commonTerms(ctx context.Context) (map[string]bool, error) {
	commonTermCache.Lock()
	e, ok := commonTermCache.byDB[s.db]
	commonTermCache.Unlock()
	if ok && time.Since(e.at) < commonTermsTTL {
		return e.set, nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT e FROM pg_stats st,
			unnest(st.most_common_elems::text::text[], st.most_common_elem_freqs) AS u(e, f)
		WHERE st.schemaname = current_schema() AND st.tablename = 'idx_chat_messages_fts'
		  AND e IS NOT NULL AND f > $1
		  AND (SELECT reltuples FROM pg_class WHERE oid = 'chat_messages'::regclass) >= $2`, commonTermFreq, commonTermMinRows)
	if err != nil {
		return nil, wrapErr("recall term statistics", err)
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			return nil, wrapErr("recall term statistics", err)
		}
		set[w] = true
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr("recall term statistics", err)
	}
	commonTermCache.Lock()
	if commonTermCache.byDB == nil || len(commonTermCache.byDB) > 64 {
		commonTermCache.byDB = map[any]commonTermEntry{}
	}
	commonTermCache.byDB[s.db] = commonTermEntry{at: time.Now(), set: set}
	commonTermCache.Unlock()
	return set, nil
}

// recallCandidates is how many of the newest matching rows a search ranks.
const recallCandidates = 300

// searchMessages ranks the matching rows (ts_rank_cd, normalised to 0..1)
// and makes a headline only for the few returned. The query is planned for
// each call with its values (QueryExecModeExec): a generic plan, not knowing
// how rare the words are, intersects the full-text index with the
// timeline's whole range.
func (s *Store) searchMessages(ctx context.Context, q services.RecallQuery) ([]services.RecallHit, error) {
	// The newest matches are ranked: a word in most rows (the 'simple'
	// index has no stop words) costs a bounded walk back along the
	// timeline's rows instead of ranking all of them; the planner chooses
	// between that walk and the full-text index by the words' frequency.
	mode := pgx.QueryExecModeExec
	headline := `ts_headline('simple', left(m.content, 20000), q.q, 'MaxWords=24, MinWords=8, MaxFragments=1, StartSel=**, StopSel=**')`
	hits := `
		candidates AS (
			SELECT id, content FROM chat_messages, q
			WHERE ` + recallVector + ` @@ q.q AND ` + recallView + `
			  AND ($4::timestamptz IS NULL OR created_at >= $4)
			  AND ($5::timestamptz IS NULL OR created_at < $5)
			  AND ($6::bigint = 0 OR id <= $6)
			ORDER BY id DESC LIMIT ` + strconv.Itoa(recallCandidates) + `
		),
		hits AS (
			SELECT id, ts_rank_cd(` + recallVector + `, q.q, 32) AS score
			FROM candidates, q
			ORDER BY score DESC, id DESC LIMIT $7
		)`
	if q.HandoffsOnly {
		// The newest handoffs (idx_chat_messages_handoffs, its predicate
		// spelled alike), ranked: a bounded cost for every prompt, however
		// common the input's words are in the rest of the table.
		hits = `
		recent AS (
			SELECT id, content FROM chat_messages
			WHERE visible = 0 AND metadata->>'kind' = 'handoff' AND ` + recallView + `
			  AND ($4::timestamptz IS NULL OR created_at >= $4)
			  AND ($5::timestamptz IS NULL OR created_at < $5)
			  AND ($6::bigint = 0 OR id <= $6)
			  AND (NOT $8::boolean OR id > COALESCE((SELECT max(from_message_id) FROM chat_summary_segments
			                                         WHERE timeline_scope = $1 AND scope = $2 AND kind = 'reset'), 0))
			ORDER BY id DESC LIMIT ` + strconv.Itoa(recallHandoffCandidates) + `
		),
		vectors AS (SELECT id, to_tsvector('simple', left(content, 1000)) AS v FROM recent),
		hits AS (
			SELECT id, ts_rank_cd(v, q.q, 32) AS score
			FROM vectors, q
			WHERE v @@ q.q
			ORDER BY score DESC, id DESC LIMIT $7
		)`
		// Their readers take the whole handoff, not a passage. Every main
		// prompt runs this: a cached plan (the newest handoffs by the
		// partial index whatever the words) spares planning it each time.
		headline, mode = `''`, pgx.QueryExecModeCacheStatement
	}
	args := []any{mode, q.View.TimelineScope, q.View.ContextScope, recallTSQuery(q), timeArg(q.After), timeArg(q.Before), q.MaxID, q.Limit}
	if q.HandoffsOnly {
		args = append(args, q.AfterReset)
	}
	rows, err := s.db.Query(ctx, `
		WITH q AS (SELECT websearch_to_tsquery('simple', $3) AS q),`+hits+`
		SELECT m.id, m.role, m.context_scope, COALESCE(m.agent_id, ''), m.created_at,
			`+headline+`,
			COALESCE(m.token_count, 0), length(m.content), hits.score, COALESCE(m.metadata->>'kind', '')
		FROM hits JOIN chat_messages m ON m.id = hits.id, q
		ORDER BY hits.score DESC, m.id DESC`, args...)
	if err != nil {
		return nil, wrapErr("search messages", err)
	}
	defer rows.Close()
	var out []services.RecallHit
	for rows.Next() {
		h := services.RecallHit{Kind: services.RecallMessage}
		var chars int
		if err := rows.Scan(&h.ID, &h.Role, &h.ContextScope, &h.AgentID, &h.CreatedAt, &h.Snippet, &h.Tokens, &chars, &h.Score, &h.MessageKind); err != nil {
			return nil, wrapErr("search messages", err)
		}
		if h.Tokens == 0 {
			h.Tokens = chars/4 + 1 // rows stored before token counting
		}
		h.Snippet = strings.Join(strings.Fields(h.Snippet), " ")
		out = append(out, h)
	}
	return out, wrapErr("search messages", rows.Err())
}

// RecallMessages returns the rows of ids within v, in id order.
func (s *Store) RecallMessages(ctx context.Context, v services.RecallView, ids []int64) ([]services.Message, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT `+messageColumns+` FROM chat_messages
		WHERE id = ANY($3) AND `+recallView+`
		ORDER BY id`, v.TimelineScope, v.ContextScope, ids)
	msgs, err := collectMessages(rows, err)
	return msgs, wrapErr("recall messages", err)
}

// RecallAround returns the rows of v around id, in id order.
func (s *Store) RecallAround(ctx context.Context, v services.RecallView, id int64, before, after int) ([]services.Message, error) {
	rows, err := s.db.Query(ctx, `
		SELECT * FROM (
			(SELECT `+messageColumns+` FROM chat_messages WHERE id < $3 AND `+recallView+` ORDER BY id DESC LIMIT $4)
			UNION ALL
			(SELECT `+messageColumns+` FROM chat_messages WHERE id >= $3 AND `+recallView+` ORDER BY id LIMIT $5)
		) around ORDER BY id`, v.TimelineScope, v.ContextScope, id, max(before, 0), max(after, 0)+1)
	msgs, err := collectMessages(rows, err)
	if err != nil {
		return nil, wrapErr("recall around", err)
	}
	for _, m := range msgs {
		if m.ID == id {
			return msgs, nil
		}
	}
	return nil, services.Errorf(services.ENOTFOUND, "message m%d is not in this conversation's archive", id)
}
