-- +goose Up
-- Daily token budgets per kind of run (docs/OPERATIONS.md, "Budgets"): one
-- row per day of the owner's zone and kind. A model call reserves its
-- estimate in one UPDATE that only succeeds within the limit, and settles
-- to its usage after the call.
CREATE TABLE budget_days (
    day      DATE   NOT NULL,
    kind     TEXT   NOT NULL CHECK (kind IN ('main', 'subagent', 'schedule')),
    spent    BIGINT NOT NULL DEFAULT 0 CHECK (spent >= 0),
    reserved BIGINT NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    calls    BIGINT NOT NULL DEFAULT 0,
    refused  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, kind)
);

-- A fire a budget refused ends 'skipped' (not a failure: it does not count
-- towards pausing the schedule). The list keeps the monitors' outcomes.
ALTER TABLE schedule_fires DROP CONSTRAINT IF EXISTS schedule_fires_status_check;
ALTER TABLE schedule_fires ADD CONSTRAINT schedule_fires_status_check
    CHECK (status IN ('running', 'ok', 'error', 'interrupted', 'skipped', 'unchanged', 'caught_up', 'ran', 'failed'));

-- +goose Down
ALTER TABLE schedule_fires DROP CONSTRAINT IF EXISTS schedule_fires_status_check;
ALTER TABLE schedule_fires ADD CONSTRAINT schedule_fires_status_check
    CHECK (status IN ('running', 'ok', 'error', 'interrupted'));
DROP TABLE budget_days;
