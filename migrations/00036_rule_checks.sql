-- +goose Up
-- A hard rule may carry a check pattern (a Go regexp, docs/CONTEXT.md
-- "Checking answers against rules"): an answer it matches is flagged under
-- the answer with a notice. '' means no check.
ALTER TABLE context_constraints ADD COLUMN check_pattern TEXT NOT NULL DEFAULT ''
    CHECK (length(check_pattern) <= 1000);

-- +goose Down
ALTER TABLE context_constraints DROP COLUMN check_pattern;
