-- The Telegram channel's own state.
--
-- telegram_bot_state: per bot (the numeric id before the token's colon), the
-- last update id whose message is stored (so a restarted poller neither
-- reprocesses nor skips updates) and the hash of the command menu last set
-- (setMyCommands is only called when it changed).
--
-- telegram_pairings: one row per Telegram user who is not the owner and asked
-- to talk to the bot under TELEGRAM_POLICY=pairing. A pending row carries a
-- short code valid until expires_at; the owner approves it by code, which
-- sets approved_at. An approved user writes to their own timeline
-- (timeline_scope, 'tg:<user id>'), which the owner's timeline never shows.
--
-- telegram_sent_chunks: which chunks of an outbound delivery (key of the
-- outbound job, chunk index) reached Telegram, so a retried delivery never
-- sends a chunk twice.

-- +goose Up
CREATE TABLE telegram_bot_state (
    bot_id          BIGINT      PRIMARY KEY,
    last_update_id  BIGINT      NOT NULL DEFAULT 0,
    commands_sha256 TEXT        NOT NULL DEFAULT '',
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE telegram_pairings (
    user_id        BIGINT      PRIMARY KEY,
    chat_id        BIGINT      NOT NULL,
    display_name   TEXT        NOT NULL DEFAULT '',
    code           TEXT        NOT NULL UNIQUE CHECK (code ~ '^[A-Z0-9]{4,16}$'),
    timeline_scope TEXT        NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at     TIMESTAMPTZ NOT NULL,
    approved_at    TIMESTAMPTZ
);

CREATE TABLE telegram_sent_chunks (
    outbound_key TEXT        NOT NULL,
    chunk_index  INTEGER     NOT NULL CHECK (chunk_index >= 0),
    message_id   BIGINT      NOT NULL,
    sent_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (outbound_key, chunk_index)
);

-- +goose Down
DROP TABLE telegram_sent_chunks;
DROP TABLE telegram_pairings;
DROP TABLE telegram_bot_state;
