-- outbound_deliveries: every delivery to an external channel (a Telegram
-- answer, a notice), in the order it was scheduled. The deliveries of one
-- lane (one Telegram chat) go out one at a time in id order: a worker holds
-- the lane's advisory lock while it sends the lane's pending deliveries, so
-- a later answer never goes out between the chunks of an earlier one, across
-- retries, restarts and instances. A delivery's River job only wakes a
-- worker for its lane; the reaper wakes one for a lane whose worker died.
-- done_at is set once a delivery went out or was given up (failed_at too).
-- A head that failed waits until not_before (Telegram's retry_after, or a
-- backoff), whichever job of its lane looks at it.
--
-- telegram_sent_chunks.message_id is NULL while a chunk's sendMessage is in
-- flight: after a crash, a chunk found that way is sent again at most once
-- (attempts counts the sends whose outcome is unknown).

-- +goose Up
CREATE TABLE outbound_deliveries (
    id         BIGSERIAL   PRIMARY KEY,
    channel    TEXT        NOT NULL,
    key        TEXT        NOT NULL,
    lane       TEXT        NOT NULL,
    payload    BYTEA       NOT NULL,
    attempts   INTEGER     NOT NULL DEFAULT 0,
    last_error TEXT,
    -- not_before: after a 429 or a failed call, no worker calls the channel
    -- for this delivery (the head of its lane) before then.
    not_before TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    done_at    TIMESTAMPTZ,
    failed_at  TIMESTAMPTZ,
    UNIQUE (channel, key)
);
CREATE INDEX idx_outbound_deliveries_pending ON outbound_deliveries (channel, lane, id) WHERE done_at IS NULL;

ALTER TABLE telegram_sent_chunks ALTER COLUMN message_id DROP NOT NULL;
ALTER TABLE telegram_sent_chunks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;

-- +goose Down
DELETE FROM telegram_sent_chunks WHERE message_id IS NULL;
ALTER TABLE telegram_sent_chunks DROP COLUMN attempts;
ALTER TABLE telegram_sent_chunks ALTER COLUMN message_id SET NOT NULL;
DROP TABLE outbound_deliveries;
