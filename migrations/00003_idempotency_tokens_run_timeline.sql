-- Features beyond seed 003's phases, all additive:
--   * chat_messages.dedupe_key: a channel-supplied idempotency key (Telegram
--     update id, a web client's message key). One row per (timeline, source,
--     key), so a retried delivery finds the row it already stored.
--   * chat_messages.token_count: tokens counted once when the row is written.
--   * agent_runs.timeline_scope and trigger_message_id: which timeline a run
--     serves and which message started it; provider-reported usage beside the
--     estimate; heartbeat_at to detect runs whose worker died.

-- +goose Up
ALTER TABLE chat_messages
    ADD COLUMN dedupe_key  TEXT,
    ADD COLUMN token_count INTEGER;

CREATE UNIQUE INDEX idx_chat_messages_dedupe
    ON chat_messages (timeline_scope, source, dedupe_key)
    WHERE dedupe_key IS NOT NULL;

ALTER TABLE agent_runs
    ADD COLUMN timeline_scope     TEXT NOT NULL DEFAULT 'global',
    ADD COLUMN trigger_message_id BIGINT REFERENCES chat_messages (id),
    ADD COLUMN prompt_tokens      INTEGER,
    ADD COLUMN completion_tokens  INTEGER,
    ADD COLUMN cached_tokens      INTEGER,
    ADD COLUMN heartbeat_at       TIMESTAMPTZ;

CREATE INDEX idx_agent_runs_timeline_scope_id ON agent_runs (timeline_scope, id DESC);
CREATE INDEX idx_agent_runs_parent_run_id ON agent_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

-- +goose Down
DROP INDEX idx_agent_runs_parent_run_id;
DROP INDEX idx_agent_runs_timeline_scope_id;
ALTER TABLE agent_runs
    DROP COLUMN heartbeat_at,
    DROP COLUMN cached_tokens,
    DROP COLUMN completion_tokens,
    DROP COLUMN prompt_tokens,
    DROP COLUMN trigger_message_id,
    DROP COLUMN timeline_scope;
DROP INDEX idx_chat_messages_dedupe;
ALTER TABLE chat_messages
    DROP COLUMN token_count,
    DROP COLUMN dedupe_key;
