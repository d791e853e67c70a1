-- Switchboard inspection queries. Run with:
--   psql "$DATABASE_URL" -f scripts/inspect.sql
-- The first three are seed 003's appendix ("常用巡检 SQL"), verbatim.

-- name: recent_visible_messages
-- 最近 20 条可见聊天消息 (the 20 most recent visible chat messages)
SELECT id, role, source, created_at, substr(content, 1, 120)
FROM chat_messages
WHERE visible = 1
ORDER BY id DESC
LIMIT 20;

-- name: summary_cursors
-- 各 scope 摘要游标 (summary cursor of every scope)
SELECT scope, until_message_id, length(summary_text) AS summary_len, updated_at
FROM chat_context_summaries
ORDER BY updated_at DESC;

-- name: recent_runs
-- 最近 20 次 agent run (the 20 most recent agent runs)
SELECT id, source, status, model, started_at, finished_at
FROM agent_runs
ORDER BY id DESC
LIMIT 20;
