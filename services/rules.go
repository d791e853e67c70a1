package services

import (
	"context"
	"path"
	"strings"
	"time"
)

// RulesFileNames are the standing-rules files of a timeline's workspace: the
// one at the workspace root whose name matches one of these, ignoring case,
// is sent with every prompt under the rules heading. They are the owner's:
// the agent's write tools refuse them (unless AGENT_RULES_WRITABLE=1).
var RulesFileNames = []string{"rules.md", "code_law.md"}

// IsRulesFile reports whether the slash- or OS-separated relative path p,
// once cleaned, names a rules file at the workspace root ("RULES.md",
// "./rules.MD", "sub/../Code_Law.md"). Symlinks are the caller's to resolve.
func IsRulesFile(p string) bool {
	p = path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if strings.Contains(p, "/") {
		return false
	}
	for _, n := range RulesFileNames {
		if strings.EqualFold(p, n) {
			return true
		}
	}
	return false
}

// Rule proposal statuses.
const (
	ProposalPending  = "pending"
	ProposalApproved = "approved"
	ProposalRejected = "rejected"
)

// RuleProposal is a rule the agent proposed (the propose_rule tool). It
// reaches prompts only once the owner approves it (/rules approve N), which
// makes it a Constraint; until then it is stored and shown, never sent.
type RuleProposal struct {
	ID            int64
	TimelineScope string
	Text          string
	Hard          bool
	Status        string
	// RunID is the run that proposed it.
	RunID int64
	// ConstraintID is the rule an approval created.
	ConstraintID int64
	CreatedAt    time.Time
	DecidedAt    *time.Time
}

// RuleProposals stores the agent's rule proposals and the owner's decisions.
type RuleProposals interface {
	// ProposeRule stores a pending proposal; EINVALID for empty or oversized
	// text.
	ProposeRule(ctx context.Context, p RuleProposal) (RuleProposal, error)
	// DecideRuleProposal approves (creating the Constraint in the same
	// transaction) or rejects proposal id of timelineScope. ENOTFOUND when the
	// timeline has no such proposal, ECONFLICT when it was already decided.
	DecideRuleProposal(ctx context.Context, timelineScope string, id int64, approve bool) (RuleProposal, error)
	// ListRuleProposals returns a timeline's pending proposals, oldest first.
	ListRuleProposals(ctx context.Context, timelineScope string) ([]RuleProposal, error)
}
