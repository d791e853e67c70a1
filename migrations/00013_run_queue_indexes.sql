-- Indexes for the agent runtime: the next queued run of a timeline, runs by
-- trigger message (one run per user message), and runs by status (reaper).

-- +goose Up
CREATE INDEX idx_agent_runs_queued ON agent_runs (timeline_scope, id) WHERE status = 'queued' AND parent_run_id IS NULL;
CREATE UNIQUE INDEX idx_agent_runs_trigger_message ON agent_runs (trigger_message_id) WHERE trigger_message_id IS NOT NULL AND parent_run_id IS NULL;
CREATE INDEX idx_agent_runs_status ON agent_runs (status) WHERE finished_at IS NULL;

-- +goose Down
DROP INDEX idx_agent_runs_status;
DROP INDEX idx_agent_runs_trigger_message;
DROP INDEX idx_agent_runs_queued;
