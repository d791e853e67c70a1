package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard/switchboard/services"
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

// ProposeRule is the propose_rule tool: the agent cannot write the
// standing rules (the write tools refuse RULES.md and CODE_LAW.md); it
// proposes one, kept in Proposals and shown to the owner through Chat,
// who approves or rejects it on any channel (/rules approve N).
type ProposeRule struct {
	Proposals services.RuleProposals
	Chat      Poster
	Runs      RunReader
}

// Register adds propose_rule.
func (p ProposeRule) Register(reg *Registry) error {
	if p.Proposals == nil || p.Chat == nil || p.Runs == nil {
		return errors.New("propose_rule: Proposals, Chat and Runs are required")
	}
	return reg.Register(Func("propose_rule", services.EffectPersist,
		"Propose a standing rule (one of the rules sent with every prompt) to the owner. It takes effect only "+
			"when the owner approves it; you cannot write RULES.md or CODE_LAW.md yourself.",
		p.handle).WithHistory(HistoryRule{MaxChars: 300}))
}

func (t ProposeRule) handle(ctx context.Context, call Call, args proposeRuleArgs) (Result, error) {
	store := t.Proposals
	pending, err := store.ListRuleProposals(ctx, call.TimelineScope)
	if err != nil {
		return Result{}, err
	}
	if len(pending) >= maxPendingProposals {
		return Result{}, services.Errorf(services.ECONFLICT,
			"%d rule proposals already wait for the owner's decision (at most %d); do not propose more until the owner decides", len(pending), maxPendingProposals)
	}
	p, err := store.ProposeRule(ctx, services.RuleProposal{TimelineScope: call.TimelineScope, Text: args.Text, Hard: args.Hard, RunID: call.RunID})
	if err != nil {
		return Result{}, err
	}
	kind := "soft"
	if p.Hard {
		kind = "hard"
	}
	// Shown to the owner on the channel of the question that led to it.
	_, _, err = t.Chat.Post(ctx, services.PostParams{
		TimelineScope: p.TimelineScope, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: fmt.Sprintf("The agent proposes a rule (#%d, %s): %s — /rules approve %d or /rules reject %d",
			p.ID, kind, p.Text, p.ID, p.ID),
		DedupeKey: fmt.Sprintf("rule-proposal:%d", p.ID),
		ReplyTo:   TriggerOf(ctx, t.Runs, call.RunID),
		Metadata:  services.MessageMeta{RunID: call.RunID, Notice: NoticeRuleProposal}.Encode(),
	})
	if err != nil {
		return Result{}, err
	}
	return JSONResult(map[string]any{"status": "pending", "proposal": p.ID,
		"note": "the owner was asked to approve it; it is not a rule until then"})
}
