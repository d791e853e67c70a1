-- +goose Up
-- What this database was when this version first started on it, decided
-- once (repository.Store.ContextDefault): 'scoped' for a database with no
-- conversation yet (created by this version), 'legacy' for one that held
-- messages from before context scopes. With the rollout flag variables
-- unset, the service runs the scoped mode on the first and the legacy mode
-- on the second (docs/ROLLOUT.md).
CREATE TABLE install_defaults (
    id           INT         PRIMARY KEY CHECK (id = 1),
    context_mode TEXT        NOT NULL CHECK (context_mode IN ('scoped', 'legacy')),
    decided_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE install_defaults;
