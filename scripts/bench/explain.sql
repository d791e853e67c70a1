-- Plans of the hot queries, as repository/ runs them (parameters inlined),
-- on a table of ~1M messages over 1,000 timelines plus 400 rows (200 turns)
-- in 'global'. Run by scripts/bench/run.sh explain.
\pset pager off
SELECT count(*) AS chat_messages_rows FROM chat_messages;

\echo '--- timeline page: GET /api/timeline (newest 51 visible before the latest), ListTimeline'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
SELECT * FROM (
	SELECT id, timeline_scope, context_scope, COALESCE(agent_id, ''), role, source, content, visible, metadata,
	       COALESCE(dedupe_key, ''), COALESCE(token_count, 0), created_at
	FROM chat_messages
	WHERE timeline_scope = 'global' AND id < 9223372036854775807 AND id > 0 AND (visible = 1 OR false)
	ORDER BY id DESC LIMIT 51
) page ORDER BY id;

\echo '--- ListContext backwards page (Build history, scoped read: timeline + context scope, newest 200 first)'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
SELECT * FROM (SELECT id, timeline_scope, context_scope, COALESCE(agent_id, ''), role, source, content, visible, metadata,
	       COALESCE(dedupe_key, ''), COALESCE(token_count, 0), created_at
	FROM chat_messages
	WHERE timeline_scope = 'global' AND context_scope = 'main' AND id > 0 AND id < 9223372036854775807
	ORDER BY id DESC LIMIT 200) page ORDER BY id;

\echo '--- ListContext backwards page (legacy read: visible timeline rows)'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
SELECT * FROM (SELECT id, timeline_scope, context_scope, COALESCE(agent_id, ''), role, source, content, visible, metadata,
	       COALESCE(dedupe_key, ''), COALESCE(token_count, 0), created_at
	FROM chat_messages
	WHERE timeline_scope = 'global' AND id > 0 AND id < 9223372036854775807 AND visible = 1
	ORDER BY id DESC LIMIT 200) page ORDER BY id;

\echo '--- next queued run of a timeline (queue worker), NextQueuedRun'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
SELECT id FROM agent_runs
WHERE timeline_scope = 'global' AND status = 'queued' AND parent_run_id IS NULL
ORDER BY id LIMIT 1;

\echo '--- insert of a message (timeline lock + insert, rolled back), InsertMessage'
BEGIN;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
WITH timeline_lock AS (
	SELECT pg_advisory_xact_lock(7301, hashtext(current_schema() || '/' || 'global'))
)
INSERT INTO chat_messages (timeline_scope, context_scope, agent_id, role, source, content, visible, metadata, dedupe_key, token_count)
SELECT 'global', 'main', NULL, 'user', 'api', 'explain me', 1, '{}', 'explain:1', 3
FROM timeline_lock
ON CONFLICT (timeline_scope, source, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING id;
ROLLBACK;
