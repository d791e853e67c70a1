-- Browser sessions of the owner. The cookie holds a random id; only its
-- SHA-256 is stored, so a copy of the database cannot be turned into a
-- session (nor can the stored login-token hash).

-- +goose Up
CREATE TABLE web_sessions (
    id_sha256  BYTEA       PRIMARY KEY CHECK (length(id_sha256) = 32),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_web_sessions_expires_at ON web_sessions (expires_at);

-- +goose Down
DROP TABLE web_sessions;
