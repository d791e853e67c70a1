-- schedules: tasks the agent runs on its own time (docs/SCHEDULES.md). A
-- schedule's next fire is a River job (kind schedule_fire) inserted in the
-- transaction that creates or advances the schedule; version guards
-- concurrent changes (the owner's controls and the fire that advances it).
--
-- schedule_fires: one row per (schedule, due time), inserted when the fire
-- starts, in the transaction that advances the schedule to its next fire.
-- The unique key is what makes each fire run once across retries,
-- restarts and instances; a fire whose worker died is finished by the next
-- worker that holds the schedule's lock.

-- +goose Up
CREATE TABLE schedules (
    id             BIGSERIAL   PRIMARY KEY,
    timeline_scope TEXT        NOT NULL,
    name           TEXT        NOT NULL,
    task           TEXT        NOT NULL,
    kind           TEXT        NOT NULL CHECK (kind IN ('at', 'every', 'cron')),
    spec           TEXT        NOT NULL,
    timezone       TEXT        NOT NULL,
    notify         TEXT        NOT NULL CHECK (notify IN ('always', 'on_change', 'on_finding')),
    profile        TEXT        NOT NULL DEFAULT '',
    state          TEXT        NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'done', 'deleted')),
    state_reason   TEXT        NOT NULL DEFAULT '',
    next_fire_at   TIMESTAMPTZ,
    last_fire_at   TIMESTAMPTZ,
    last_status    TEXT        NOT NULL DEFAULT '',
    last_notified  TEXT        NOT NULL DEFAULT '',
    failures       INTEGER     NOT NULL DEFAULT 0,
    version        INTEGER     NOT NULL DEFAULT 1,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_schedules_timeline ON schedules (timeline_scope, id);

CREATE TABLE schedule_fires (
    id          BIGSERIAL   PRIMARY KEY,
    schedule_id BIGINT      NOT NULL REFERENCES schedules (id),
    fire_at     TIMESTAMPTZ NOT NULL,
    run_id      BIGINT      REFERENCES agent_runs (id),
    attempts    INTEGER     NOT NULL DEFAULT 1,
    status      TEXT        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'ok', 'error', 'interrupted')),
    notified    BOOLEAN     NOT NULL DEFAULT false,
    message_id  BIGINT      REFERENCES chat_messages (id),
    result      TEXT        NOT NULL DEFAULT '',
    error       TEXT        NOT NULL DEFAULT '',
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    UNIQUE (schedule_id, fire_at)
);
CREATE INDEX idx_schedule_fires_running ON schedule_fires (id) WHERE status = 'running';

-- +goose Down
DROP TABLE schedule_fires;
DROP TABLE schedules;
