-- Switchboard inspection queries. Run with:
--   psql "$DATABASE_URL" -f repository/inspect.sql
-- The first three are the basic checks: recent visible messages, summary cursors, recent runs.

-- name: recent_visible_messages
-- the 20 most recent visible chat messages
SELECT id, role, source, created_at, substr(content, 1, 120)
FROM chat_messages
WHERE visible = 1
ORDER BY id DESC
LIMIT 20;

-- name: summary_cursors
-- the summary cursor of every scope
SELECT scope, until_message_id, length(summary_text) AS summary_len, updated_at
FROM chat_context_summaries
ORDER BY updated_at DESC;

-- name: recent_runs
-- the 20 most recent agent runs
SELECT id, source, status, model, started_at, finished_at
FROM agent_runs
ORDER BY id DESC
LIMIT 20;

-- The queries below are Switchboard's own (seed 003, Phase 0 and 4: watch
-- growth and per-scope execution). `switchboard inspect NAME` runs one by
-- its name in a read-only transaction. No semicolons inside a query or its
-- comments: tools split this file on them.

-- name: summary_cursor_lag
-- Summary cursor of every (timeline, scope) and its lag: the messages of that
-- scope stored after the cursor, which the next prompt reads in full until a
-- compaction moves the cursor. The legacy 'global' summary covers the visible
-- timeline, any other scope covers the rows written with that context_scope.
SELECT s.timeline_scope, s.scope, s.until_message_id,
       length(s.summary_text) AS summary_len,
       lag.messages AS lag_messages,
       lag.tokens AS lag_tokens,
       s.updated_at,
       date_trunc('second', now() - s.updated_at) AS cursor_age
FROM chat_context_summaries s
CROSS JOIN LATERAL (
    SELECT count(*) AS messages, COALESCE(sum(m.token_count), 0) AS tokens
    FROM chat_messages m
    WHERE m.timeline_scope = s.timeline_scope
      AND m.id > s.until_message_id
      AND CASE WHEN s.scope = 'global' THEN m.visible = 1 ELSE m.context_scope = s.scope END
) AS lag
ORDER BY lag.messages DESC, s.timeline_scope, s.scope;

-- name: runs_per_day
-- Runs of the last 30 days per day and status, with the prompt token budget
-- against the ContextManager's estimate of the first prompt and the
-- provider-reported prompt tokens (summed over every model call of the run,
-- so tool loops exceed the estimate). budget_use near 1 means prompts are
-- being trimmed, and provider_per_estimate far from 1 means the tokenizer is off.
SELECT date_trunc('day', started_at)::date AS day,
       status,
       count(*) AS runs,
       count(*) FILTER (WHERE parent_run_id IS NOT NULL) AS child_runs,
       round(avg(prompt_token_budget)) AS avg_budget,
       round(avg(estimated_prompt_tokens)) AS avg_estimated,
       round(avg(prompt_tokens)) AS avg_provider_prompt,
       round(avg(estimated_prompt_tokens::numeric / NULLIF(prompt_token_budget, 0)), 3) AS budget_use,
       round(sum(prompt_tokens)::numeric / NULLIF(sum(estimated_prompt_tokens), 0), 3) AS provider_per_estimate,
       COALESCE(sum(cached_tokens), 0) AS cached_tokens,
       round(avg(extract(epoch FROM finished_at - started_at))::numeric, 1) AS avg_seconds
FROM agent_runs
WHERE started_at >= date_trunc('day', now()) - interval '29 days'
GROUP BY 1, 2
ORDER BY 1 DESC, 2;

-- name: growth_per_day
-- New rows per day over the last 30 days: visible and hidden messages, runs,
-- steps, summary segments appended by compactions, and summary cursors moved
-- (a cursor row is upserted, so this counts the cursors whose last move was
-- that day). Days without activity are left out.
WITH days AS (
    SELECT d::date AS day
    FROM generate_series(date_trunc('day', now()) - interval '29 days', date_trunc('day', now()), interval '1 day') AS d
), msgs AS (
    SELECT created_at::date AS day,
           count(*) FILTER (WHERE visible = 1) AS visible,
           count(*) FILTER (WHERE visible = 0) AS hidden
    FROM chat_messages
    WHERE created_at >= date_trunc('day', now()) - interval '29 days'
    GROUP BY 1
), runs AS (
    SELECT started_at::date AS day, count(*) AS runs
    FROM agent_runs
    WHERE started_at >= date_trunc('day', now()) - interval '29 days'
    GROUP BY 1
), steps AS (
    SELECT created_at::date AS day, count(*) AS steps
    FROM agent_run_steps
    WHERE created_at >= date_trunc('day', now()) - interval '29 days'
    GROUP BY 1
), segs AS (
    SELECT created_at::date AS day, count(*) AS segments
    FROM chat_summary_segments
    WHERE kind = 'summary' AND created_at >= date_trunc('day', now()) - interval '29 days'
    GROUP BY 1
), sums AS (
    SELECT updated_at::date AS day, count(*) AS summaries
    FROM chat_context_summaries
    WHERE updated_at >= date_trunc('day', now()) - interval '29 days'
    GROUP BY 1
)
SELECT days.day,
       COALESCE(msgs.visible, 0) AS visible_messages,
       COALESCE(msgs.hidden, 0) AS hidden_messages,
       COALESCE(runs.runs, 0) AS runs,
       COALESCE(steps.steps, 0) AS steps,
       COALESCE(segs.segments, 0) AS summary_segments,
       COALESCE(sums.summaries, 0) AS cursors_moved
FROM days
LEFT JOIN msgs USING (day)
LEFT JOIN runs USING (day)
LEFT JOIN steps USING (day)
LEFT JOIN segs USING (day)
LEFT JOIN sums USING (day)
WHERE msgs.day IS NOT NULL OR runs.day IS NOT NULL OR steps.day IS NOT NULL
   OR segs.day IS NOT NULL OR sums.day IS NOT NULL
ORDER BY days.day DESC;

-- name: child_runs_per_parent
-- Sub-agent runs under each of the 20 most recent main runs: direct children
-- by status, every descendant (children of children), the deepest level,
-- and the tokens the tree used. A main run that delegated nothing shows 0.
WITH RECURSIVE parents AS (
    SELECT id, timeline_scope, status, started_at
    FROM agent_runs
    WHERE parent_run_id IS NULL
    ORDER BY id DESC
    LIMIT 20
), tree AS (
    SELECT c.id, c.parent_run_id AS root_id, c.parent_run_id, c.status, c.prompt_tokens, 1 AS depth
    FROM agent_runs c
    JOIN parents p ON c.parent_run_id = p.id
    UNION ALL
    SELECT c.id, t.root_id, c.parent_run_id, c.status, c.prompt_tokens, t.depth + 1
    FROM agent_runs c
    JOIN tree t ON c.parent_run_id = t.id
    WHERE t.depth < 10
)
SELECT p.id AS parent_run_id, p.timeline_scope, p.status AS parent_status, p.started_at,
       count(t.id) FILTER (WHERE t.depth = 1) AS children,
       count(t.id) FILTER (WHERE t.depth = 1 AND t.status = 'ok') AS children_ok,
       count(t.id) FILTER (WHERE t.depth = 1 AND t.status IN ('error', 'timeout', 'cancelled', 'interrupted')) AS children_failed,
       count(t.id) FILTER (WHERE t.depth = 1 AND t.status IN ('queued', 'running')) AS children_unfinished,
       count(t.id) AS descendants,
       COALESCE(max(t.depth), 0) AS max_depth,
       COALESCE(sum(t.prompt_tokens), 0) AS descendant_prompt_tokens
FROM parents p
LEFT JOIN tree t ON t.root_id = p.id
GROUP BY p.id, p.timeline_scope, p.status, p.started_at
ORDER BY p.id DESC;

-- name: oldest_unfinished_run
-- The run that has been open longest (no finished_at): queued behind a busy
-- timeline, running, or left by a dead worker for the reaper. A heartbeat
-- older than a minute on a running run means its worker is gone.
SELECT id, timeline_scope, context_scope, parent_run_id, status, source, model,
       started_at, heartbeat_at,
       date_trunc('second', now() - started_at) AS age,
       date_trunc('second', now() - heartbeat_at) AS since_heartbeat
FROM agent_runs
WHERE finished_at IS NULL
ORDER BY started_at, id
LIMIT 1;
