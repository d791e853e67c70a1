package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// maxPendingProposals bounds the rule proposals waiting for the owner in
// one timeline: a model cannot bury the owner in them.
const maxPendingProposals = 5

// NoticeRuleProposal marks the visible system message that shows the owner
// a rule the agent proposes (MessageMeta.Notice).
const NoticeRuleProposal = "rule_proposal"

type proposeRuleArgs struct {
	Text string `json:"text" jsonschema:"The rule: one self-contained instruction, as the owner would write it."`
	Hard bool   `json:"hard,omitempty" jsonschema:"A hard rule (always followed) rather than a soft preference. Default false."`
}

// proposals is where rule proposals are kept (Deps.Proposals; nil: no
// propose_rule tool, no /rules approve).
func (s *Service) proposals() services.RuleProposals { return s.opts.Proposals }

// registerProposeRule adds the propose_rule tool: the agent cannot write
// the standing rules (the write tools refuse RULES.md and CODE_LAW.md); it
// proposes one, which the owner approves or rejects on any channel.
func (s *Service) registerProposeRule(reg *tools.Registry) error {
	return reg.Register(tools.Func("propose_rule", services.EffectPersist,
		"Propose a standing rule (one of the rules sent with every prompt) to the owner. It takes effect only "+
			"when the owner approves it; you cannot write RULES.md or CODE_LAW.md yourself.",
		s.handleProposeRule).WithHistory(tools.HistoryRule{MaxChars: 300}))
}

func (s *Service) handleProposeRule(ctx context.Context, call tools.Call, args proposeRuleArgs) (tools.Result, error) {
	store := s.proposals()
	pending, err := store.ListRuleProposals(ctx, call.TimelineScope)
	if err != nil {
		return tools.Result{}, err
	}
	if len(pending) >= maxPendingProposals {
		return tools.Result{}, services.Errorf(services.ECONFLICT,
			"%d rule proposals already wait for the owner's decision (at most %d); do not propose more until the owner decides", len(pending), maxPendingProposals)
	}
	p, err := store.ProposeRule(ctx, services.RuleProposal{TimelineScope: call.TimelineScope, Text: args.Text, Hard: args.Hard, RunID: call.RunID})
	if err != nil {
		return tools.Result{}, err
	}
	kind := "soft"
	if p.Hard {
		kind = "hard"
	}
	// Shown to the owner on the channel of the question that led to it.
	_, _, err = s.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: p.TimelineScope, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: fmt.Sprintf("The agent proposes a rule (#%d, %s): %s — /rules approve %d or /rules reject %d",
			p.ID, kind, p.Text, p.ID, p.ID),
		DedupeKey: fmt.Sprintf("rule-proposal:%d", p.ID),
		ReplyTo:   s.triggerOf(ctx, call.RunID),
		Metadata:  services.MessageMeta{RunID: call.RunID, Notice: NoticeRuleProposal}.Encode(),
	})
	if err != nil {
		return tools.Result{}, err
	}
	return tools.JSONResult(map[string]any{"status": "pending", "proposal": p.ID,
		"note": "the owner was asked to approve it; it is not a rule until then"})
}

// triggerOf is the user message a run (or the run it was delegated from)
// answers, 0 when unknown.
func (s *Service) triggerOf(ctx context.Context, runID int64) int64 {
	for range 8 {
		r, err := s.opts.Store.GetRun(ctx, runID)
		if err != nil {
			return 0
		}
		if r.TriggerMessageID != 0 || r.ParentRunID == 0 {
			return r.TriggerMessageID
		}
		runID = r.ParentRunID
	}
	return 0
}

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
