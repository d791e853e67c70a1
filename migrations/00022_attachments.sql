-- attachments: the files that came with a message (a Telegram photo, a
-- document uploaded on the web page, a voice note) or that the agent sent
-- (send_file). The bytes live in the timeline's workspace at storage_key
-- (uploads/<sha256 prefix>.<ext>), stored once per content; this table links
-- them to their message. Rows are added with their message, in the same
-- transaction; only transcription is filled in later, once.

-- +goose Up
CREATE TABLE attachments (
    id             BIGSERIAL   PRIMARY KEY,
    message_id     BIGINT      NOT NULL REFERENCES chat_messages (id),
    timeline_scope TEXT        NOT NULL,
    kind           TEXT        NOT NULL CHECK (kind IN ('image', 'document', 'voice', 'audio', 'video')),
    mime_type      TEXT        NOT NULL,
    size_bytes     BIGINT      NOT NULL CHECK (size_bytes > 0),
    sha256         TEXT        NOT NULL CHECK (length(sha256) = 64),
    storage_key    TEXT        NOT NULL,
    original_name  TEXT        NOT NULL DEFAULT '',
    width          INTEGER     NOT NULL DEFAULT 0,
    height         INTEGER     NOT NULL DEFAULT 0,
    duration_sec   INTEGER     NOT NULL DEFAULT 0,
    transcription  TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX attachments_message ON attachments (message_id);
CREATE INDEX attachments_timeline_sha ON attachments (timeline_scope, sha256);

-- +goose Down
DROP TABLE attachments;
