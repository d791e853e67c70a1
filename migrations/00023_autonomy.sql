-- Bounded autonomy (docs/SECURITY.md): the taint of a run, the approvals
-- that hold tool calls for the owner's decision, and the provenance of
-- remembered items.

-- +goose Up
ALTER TABLE agent_runs ADD COLUMN tainted_by TEXT;
-- A run that resumes a waiting one answers the same trigger.
ALTER TABLE agent_runs ADD COLUMN resumes_run_id BIGINT;
DROP INDEX idx_agent_runs_trigger_message;
CREATE UNIQUE INDEX idx_agent_runs_trigger_message ON agent_runs (trigger_message_id)
    WHERE trigger_message_id IS NOT NULL AND parent_run_id IS NULL AND resumes_run_id IS NULL;

CREATE TABLE approvals (
    id                 BIGSERIAL PRIMARY KEY,
    run_id             BIGINT      NOT NULL,
    timeline_scope     TEXT        NOT NULL,
    context_scope      TEXT        NOT NULL DEFAULT 'main',
    trigger_message_id BIGINT,
    call_id            TEXT        NOT NULL,
    tool               TEXT        NOT NULL,
    arguments          JSONB       NOT NULL,
    effect             TEXT        NOT NULL,
    tainted_by         TEXT,
    state              TEXT        NOT NULL DEFAULT 'pending' CHECK (state IN
        ('pending', 'approved', 'denied', 'timed_out', 'cancelled', 'executing', 'executed', 'interrupted')),
    detached           BOOLEAN     NOT NULL DEFAULT false,
    resume_run_id      BIGINT,
    decided_by         TEXT,
    result             TEXT,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at         TIMESTAMPTZ NOT NULL,
    decided_at         TIMESTAMPTZ,
    UNIQUE (run_id, call_id)
);
CREATE INDEX idx_approvals_pending ON approvals (expires_at) WHERE state = 'pending';
CREATE INDEX idx_approvals_resume ON approvals (resume_run_id) WHERE resume_run_id IS NOT NULL;

ALTER TABLE memory_items ADD COLUMN run_id BIGINT;
ALTER TABLE memory_items ADD COLUMN origin TEXT;
ALTER TABLE memory_items ADD COLUMN forgotten_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE memory_items DROP COLUMN forgotten_at;
ALTER TABLE memory_items DROP COLUMN origin;
ALTER TABLE memory_items DROP COLUMN run_id;
DROP TABLE approvals;
DROP INDEX idx_agent_runs_trigger_message;
CREATE UNIQUE INDEX idx_agent_runs_trigger_message ON agent_runs (trigger_message_id) WHERE trigger_message_id IS NOT NULL AND parent_run_id IS NULL;
ALTER TABLE agent_runs DROP COLUMN resumes_run_id;
ALTER TABLE agent_runs DROP COLUMN tainted_by;
