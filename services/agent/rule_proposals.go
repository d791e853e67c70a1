package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// The owner's side of the agent's rule proposals (the propose_rule tool is
// services/tools/propose_rule.go): /rules lists them, /rules approve and
// /rules reject decide them.

// proposals is where rule proposals are kept (Deps.Proposals; nil: no
// /rules approve).
func (s *Service) proposals() services.RuleProposals { return s.opts.Proposals }

// cmdRuleDecision answers "/rules approve N" and "/rules reject N".
func (s *Service) cmdRuleDecision(ctx context.Context, msg services.Message, verb, rest string) (string, error) {
	store := s.proposals()
	if store == nil {
		return "Rule proposals are not available.", nil
	}
	var id int64
	if _, err := fmt.Sscan(strings.TrimPrefix(rest, "#"), &id); err != nil || id <= 0 {
		return "", services.Errorf(services.EINVALID, "say which proposal: /rules %s N", verb)
	}
	p, err := store.DecideRuleProposal(ctx, msg.TimelineScope, id, verb == "approve")
	if err != nil {
		return "", err
	}
	s.auditCommand(ctx, msg, services.RuleProposalAudit("", p))
	if p.Status == services.ProposalRejected {
		return fmt.Sprintf("Rejected rule proposal #%d; it will not be used.", p.ID), nil
	}
	return fmt.Sprintf("Approved rule proposal #%d: it is now rule #%d and is sent with every prompt.", p.ID, p.ConstraintID), nil
}
