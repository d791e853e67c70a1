-- +goose Up
-- The budget profile of a timeline's prompts (docs/CONTEXT.md, "Budget
-- profiles"): per layer its share and minimum, as JSON, with the version
-- an update must carry (CONTEXT_BUDGET_CONFLICT when stale). No row: the
-- default profile. A profile that is not valid when read (edited by hand)
-- is not used: prompts fall back to the default (CONTEXT_BUDGET_FALLBACK).
CREATE TABLE context_budgets (
    timeline_scope TEXT        PRIMARY KEY,
    version        INT         NOT NULL CHECK (version > 0),
    profile        JSONB       NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE context_budgets;
