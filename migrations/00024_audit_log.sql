-- audit_log: the append-only, hash-chained audit trail (services.AuditEntry).
-- Each row's hash is SHA-256 over its fields and the previous row's hash
-- (services.AuditCanonical); appends are serialised by a transaction
-- advisory lock so the chain has one order across instances. The product
-- only inserts: a trigger refuses UPDATE, DELETE and TRUNCATE. Someone with
-- the rights to disable it (the table's owner or a superuser) can still
-- change rows; `switchboard audit verify` then names the first row whose
-- link no longer holds.

-- +goose Up
CREATE TABLE audit_log (
    id             BIGSERIAL   PRIMARY KEY,
    at             TIMESTAMPTZ NOT NULL,
    actor          TEXT        NOT NULL CHECK (actor <> ''),
    channel        TEXT        NOT NULL DEFAULT '',
    action         TEXT        NOT NULL CHECK (action <> ''),
    subject        TEXT        NOT NULL DEFAULT '',
    run_id         BIGINT      NOT NULL DEFAULT 0,
    timeline_scope TEXT        NOT NULL DEFAULT '',
    status         TEXT        NOT NULL DEFAULT '',
    detail         JSONB       NOT NULL DEFAULT '{}',
    prev_hash      TEXT        NOT NULL CHECK (length(prev_hash) = 64),
    hash           TEXT        NOT NULL CHECK (length(hash) = 64)
);
CREATE INDEX audit_log_at ON audit_log (at);

-- +goose StatementBegin
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- +goose Down
DROP TABLE audit_log;
DROP FUNCTION audit_log_append_only();
