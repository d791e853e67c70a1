-- +goose Up
-- Spoken replies per chat (/voice on|off): whether a voice question in
-- this chat of this channel is answered with a voice note as well as the
-- text. No row: on (when a speech API is configured, TTS_URL).
CREATE TABLE voice_replies (
    channel    TEXT        NOT NULL,
    chat_id    BIGINT      NOT NULL,
    enabled    BOOLEAN     NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, chat_id)
);

-- +goose Down
DROP TABLE voice_replies;
