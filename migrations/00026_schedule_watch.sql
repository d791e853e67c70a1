-- +goose Up
-- A schedule's watch (docs/SCHEDULES.md, "Watching a page"): what each fire
-- reads without the model first (a URL, a CSS selector, a pattern, ignore
-- patterns), and the content the last fire that ran saw: its hash (what an
-- unchanged fire is judged by) and its normalised text (the "previous" of
-- the next change).
ALTER TABLE schedules ADD COLUMN watch      JSONB;
ALTER TABLE schedules ADD COLUMN watch_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN watch_text TEXT NOT NULL DEFAULT '';

-- Each fire's receipt: the tokens and model calls it spent, the fire times
-- it caught up (missed while the service was down) and the watched
-- content's hash it read.
ALTER TABLE schedule_fires ADD COLUMN tokens       BIGINT  NOT NULL DEFAULT 0;
ALTER TABLE schedule_fires ADD COLUMN model_calls  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedule_fires ADD COLUMN missed       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedule_fires ADD COLUMN content_hash TEXT    NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE schedule_fires DROP COLUMN content_hash;
ALTER TABLE schedule_fires DROP COLUMN missed;
ALTER TABLE schedule_fires DROP COLUMN model_calls;
ALTER TABLE schedule_fires DROP COLUMN tokens;
ALTER TABLE schedules DROP COLUMN watch_text;
ALTER TABLE schedules DROP COLUMN watch_hash;
ALTER TABLE schedules DROP COLUMN watch;
