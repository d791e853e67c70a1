-- +goose Up
-- Money budgets (BUDGET_DAILY_USD, priced by LLM_PRICES; docs/OPERATIONS.md,
-- "Budgets"): each day and kind also keeps the money settled and reserved,
-- in micro-dollars, checked with the tokens in the same reservation.
ALTER TABLE budget_days
    ADD COLUMN spent_micros    BIGINT NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
    ADD COLUMN reserved_micros BIGINT NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0);

-- +goose Down
ALTER TABLE budget_days DROP COLUMN reserved_micros, DROP COLUMN spent_micros;
