-- ContextManager layers and compaction.
--   chat_summary_segments: every summary ever made, per (timeline, scope),
--     appended and never rewritten; a 'reset' row marks /new (segments
--     before it are no longer sent). chat_context_summaries stays the cursor
--     row (until_message_id + the latest summary text).
--   context_constraints: the owner's rules (the rules layer, never trimmed).
--   memory_items: remembered preferences with confidence (settings layer).
-- Both editable tables carry a version for optimistic concurrency.

-- +goose Up
CREATE TABLE chat_summary_segments (
    id               BIGSERIAL PRIMARY KEY,
    timeline_scope   TEXT        NOT NULL,
    scope            TEXT        NOT NULL,
    kind             TEXT        NOT NULL DEFAULT 'summary' CHECK (kind IN ('summary', 'reset')),
    from_message_id  BIGINT      NOT NULL,
    until_message_id BIGINT      NOT NULL,
    summary_text     TEXT        NOT NULL,
    token_count      INTEGER     NOT NULL DEFAULT 0,
    focus            TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_chat_summary_segments_scope ON chat_summary_segments (timeline_scope, scope, id);

CREATE TABLE context_constraints (
    id             BIGSERIAL PRIMARY KEY,
    timeline_scope TEXT        NOT NULL,
    text           TEXT        NOT NULL CHECK (length(text) BETWEEN 1 AND 4000),
    hard           BOOLEAN     NOT NULL DEFAULT true,
    version        INTEGER     NOT NULL DEFAULT 1,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_context_constraints_timeline ON context_constraints (timeline_scope, id);

CREATE TABLE memory_items (
    id             BIGSERIAL PRIMARY KEY,
    timeline_scope TEXT        NOT NULL,
    key            TEXT        NOT NULL CHECK (length(key) BETWEEN 1 AND 200),
    value          TEXT        NOT NULL CHECK (length(value) BETWEEN 1 AND 4000),
    confidence     REAL        NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    source         TEXT        NOT NULL DEFAULT 'api',
    version        INTEGER     NOT NULL DEFAULT 1,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT memory_items_timeline_key UNIQUE (timeline_scope, key)
);

-- +goose Down
DROP TABLE memory_items;
DROP TABLE context_constraints;
DROP TABLE chat_summary_segments;
