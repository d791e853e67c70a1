-- run_requests: the exact body of each model request a run sent (the JSON
-- the provider's SDK put on the wire, gzip-compressed), one row per model
-- call, written in the statement that records the call's step. The debug
-- page shows them per run and per scope. Rows older than
-- AGENT_REQUEST_RETENTION are deleted (they are a record of what was sent,
-- not chat history, which is never deleted).

-- +goose Up
CREATE TABLE run_requests (
    id             BIGSERIAL   PRIMARY KEY,
    run_id         BIGINT      NOT NULL REFERENCES agent_runs (id),
    step_id        BIGINT      NOT NULL REFERENCES agent_run_steps (id),
    timeline_scope TEXT        NOT NULL,
    context_scope  TEXT        NOT NULL,
    provider       TEXT        NOT NULL,
    model          TEXT        NOT NULL,
    url            TEXT        NOT NULL,
    body_bytes     INTEGER     NOT NULL,
    body_gzip      BYTEA       NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_run_requests_run ON run_requests (run_id, id);
CREATE INDEX idx_run_requests_scope ON run_requests (timeline_scope, context_scope, id);
CREATE INDEX idx_run_requests_created ON run_requests (created_at);

-- +goose Down
DROP TABLE run_requests;
