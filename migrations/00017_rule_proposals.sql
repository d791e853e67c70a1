-- Rules the agent proposes (the propose_rule tool). A proposal reaches no
-- prompt: it becomes one of the owner's rules (context_constraints) only
-- when the owner approves it with /rules approve N, or is dropped with
-- /rules reject N. Decided proposals are kept, with when and how.

-- +goose Up
CREATE TABLE rule_proposals (
    id             BIGSERIAL PRIMARY KEY,
    timeline_scope TEXT        NOT NULL,
    text           TEXT        NOT NULL CHECK (length(text) BETWEEN 1 AND 4000),
    hard           BOOLEAN     NOT NULL DEFAULT false,
    status         TEXT        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    run_id         BIGINT,
    constraint_id  BIGINT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    decided_at     TIMESTAMPTZ
);
CREATE INDEX idx_rule_proposals_pending ON rule_proposals (timeline_scope, id) WHERE status = 'pending';

-- +goose Down
DROP TABLE rule_proposals;
