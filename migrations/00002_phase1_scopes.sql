-- Phase 1 of seed 003: additive, compatible schema for scoped contexts.
-- Column names, types, defaults and index names are exactly the seed's.
-- Old readers and writers keep working: every new column has a default or
-- is nullable, and existing rows take the defaults ('global' timeline,
-- 'main' context scope).
--
-- Summaries become keyed by (timeline_scope, scope): the legacy unique key on
-- scope alone is replaced by one on the pair. Existing rows belong to the
-- 'global' timeline, so a legacy reader's "WHERE scope = 'global'" still finds
-- exactly the row it found before.

-- +goose Up
ALTER TABLE chat_messages
    ADD COLUMN timeline_scope TEXT NOT NULL DEFAULT 'global',
    ADD COLUMN context_scope  TEXT NOT NULL DEFAULT 'main',
    ADD COLUMN agent_id       TEXT;

ALTER TABLE agent_runs
    ADD COLUMN agent_id      TEXT,
    ADD COLUMN parent_run_id INTEGER REFERENCES agent_runs (id),
    ADD COLUMN context_scope TEXT NOT NULL DEFAULT 'main';

CREATE INDEX idx_chat_messages_context_scope_id ON chat_messages (context_scope, id);
CREATE INDEX idx_chat_messages_timeline_scope_id ON chat_messages (timeline_scope, id);
CREATE INDEX idx_agent_runs_context_scope_started_at ON agent_runs (context_scope, started_at DESC);

ALTER TABLE chat_context_summaries
    ADD COLUMN timeline_scope TEXT NOT NULL DEFAULT 'global';
ALTER TABLE chat_context_summaries
    DROP CONSTRAINT chat_context_summaries_scope_key;
ALTER TABLE chat_context_summaries
    ADD CONSTRAINT chat_context_summaries_timeline_scope_scope_key UNIQUE (timeline_scope, scope);

-- +goose Down
ALTER TABLE chat_context_summaries
    DROP CONSTRAINT chat_context_summaries_timeline_scope_scope_key;
ALTER TABLE chat_context_summaries
    ADD CONSTRAINT chat_context_summaries_scope_key UNIQUE (scope);
ALTER TABLE chat_context_summaries DROP COLUMN timeline_scope;

DROP INDEX idx_agent_runs_context_scope_started_at;
DROP INDEX idx_chat_messages_timeline_scope_id;
DROP INDEX idx_chat_messages_context_scope_id;

ALTER TABLE agent_runs
    DROP COLUMN context_scope,
    DROP COLUMN parent_run_id,
    DROP COLUMN agent_id;

ALTER TABLE chat_messages
    DROP COLUMN agent_id,
    DROP COLUMN context_scope,
    DROP COLUMN timeline_scope;
