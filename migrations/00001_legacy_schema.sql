-- Legacy schema: the "current state" of seed 003 before the scoped-context
-- work. One shared history in chat_messages, one rolling summary per scope
-- (only 'global' exists), agent runs and their steps with the per-run
-- observability columns. Later migrations only add to it.

-- +goose Up
CREATE TABLE chat_messages (
    id          BIGSERIAL PRIMARY KEY,
    role        TEXT        NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    source      TEXT        NOT NULL,
    content     TEXT        NOT NULL,
    visible     SMALLINT    NOT NULL DEFAULT 1 CHECK (visible IN (0, 1)),
    metadata    JSONB       NOT NULL DEFAULT '{}'::jsonb,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE chat_context_summaries (
    id               BIGSERIAL PRIMARY KEY,
    scope            TEXT        NOT NULL DEFAULT 'global',
    until_message_id BIGINT      NOT NULL,
    summary_text     TEXT        NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT chat_context_summaries_scope_key UNIQUE (scope)
);

CREATE TABLE agent_runs (
    id                      SERIAL PRIMARY KEY,
    source                  TEXT        NOT NULL,
    status                  TEXT        NOT NULL,
    model                   TEXT        NOT NULL DEFAULT '',
    started_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at             TIMESTAMPTZ,
    error                   TEXT,
    prompt_token_budget     INTEGER,
    estimated_prompt_tokens INTEGER,
    model_context_window    INTEGER
);

CREATE TABLE agent_run_steps (
    id          BIGSERIAL PRIMARY KEY,
    run_id      INTEGER     NOT NULL REFERENCES agent_runs (id),
    step_index  INTEGER     NOT NULL,
    kind        TEXT        NOT NULL,
    payload     JSONB       NOT NULL DEFAULT '{}'::jsonb,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT agent_run_steps_run_step_key UNIQUE (run_id, step_index)
);

-- +goose Down
DROP TABLE agent_run_steps;
DROP TABLE agent_runs;
DROP TABLE chat_context_summaries;
DROP TABLE chat_messages;
