package repository

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var _ services.RuleProposals = (*Store)(nil)

const proposalColumns = `id, timeline_scope, text, hard, status, COALESCE(run_id, 0), COALESCE(constraint_id, 0), created_at, decided_at`

func scanProposal(row pgx.Row) (services.RuleProposal, error) {
	var p services.RuleProposal
	err := row.Scan(&p.ID, &p.TimelineScope, &p.Text, &p.Hard, &p.Status, &p.RunID, &p.ConstraintID, &p.CreatedAt, &p.DecidedAt)
	return p, err
}

// ProposeRule stores a pending rule proposal.
func (s *Store) ProposeRule(ctx context.Context, p services.RuleProposal) (services.RuleProposal, error) {
	if err := validConstraintText(p.Text); err != nil {
		return services.RuleProposal{}, err
	}
	var run *int64
	if p.RunID != 0 {
		run = &p.RunID
	}
	out, err := scanProposal(s.db.QueryRow(ctx, `
		INSERT INTO rule_proposals (timeline_scope, text, hard, run_id) VALUES ($1, $2, $3, $4)
		RETURNING `+proposalColumns, p.TimelineScope, strings.TrimSpace(p.Text), p.Hard, run))
	return out, wrapErr("propose rule", err)
}

// DecideRuleProposal approves (creating the rule in the same transaction) or
// rejects a pending proposal of the timeline.
func (s *Store) DecideRuleProposal(ctx context.Context, timelineScope string, id int64, approve bool) (services.RuleProposal, error) {
	var out services.RuleProposal
	err := s.transact(ctx, func(tx *Tx) error {
		p, err := scanProposal(tx.db.QueryRow(ctx, `SELECT `+proposalColumns+` FROM rule_proposals
			WHERE id = $1 AND timeline_scope = $2 FOR UPDATE`, id, timelineScope))
		if err == pgx.ErrNoRows {
			return services.Errorf(services.ENOTFOUND, "no rule proposal #%d in this conversation", id)
		}
		if err != nil {
			return wrapErr("read rule proposal", err)
		}
		if p.Status != services.ProposalPending {
			return services.Errorf(services.ECONFLICT, "rule proposal #%d was already %s", id, p.Status)
		}
		status, constraintID := services.ProposalRejected, int64(0)
		if approve {
			c, err := tx.CreateConstraint(ctx, services.Constraint{TimelineScope: timelineScope, Text: p.Text, Hard: p.Hard})
			if err != nil {
				return err
			}
			status, constraintID = services.ProposalApproved, c.ID
		}
		var cid *int64
		if constraintID != 0 {
			cid = &constraintID
		}
		out, err = scanProposal(tx.db.QueryRow(ctx, `UPDATE rule_proposals SET status = $2, constraint_id = $3, decided_at = now()
			WHERE id = $1 RETURNING `+proposalColumns, id, status, cid))
		return wrapErr("decide rule proposal", err)
	})
	return out, err
}

// ListRuleProposals returns a timeline's pending proposals, oldest first.
func (s *Store) ListRuleProposals(ctx context.Context, timelineScope string) ([]services.RuleProposal, error) {
	rows, err := s.db.Query(ctx, `SELECT `+proposalColumns+` FROM rule_proposals
		WHERE timeline_scope = $1 AND status = 'pending' ORDER BY id`, timelineScope)
	if err != nil {
		return nil, wrapErr("list rule proposals", err)
	}
	defer rows.Close()
	var out []services.RuleProposal
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, wrapErr("list rule proposals", err)
		}
		out = append(out, p)
	}
	return out, wrapErr("list rule proposals", rows.Err())
}
