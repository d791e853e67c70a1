-- The owner's login token, stored only as its SHA-256 hash. One row.
-- Used when WEB_AUTH_TOKEN is not set: the first instance to start generates
-- a token, stores its hash here, and prints the token once.

-- +goose Up
CREATE TABLE owner_credentials (
    id           SMALLINT    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    token_sha256 BYTEA       NOT NULL CHECK (length(token_sha256) = 32),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE owner_credentials;
