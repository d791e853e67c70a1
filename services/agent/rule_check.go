package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
)

// ruleCheckTimeout bounds the check of one answer (a read and a post).
const ruleCheckTimeout = 10 * time.Second

// checkAnswer flags a stored answer that matches the check pattern of one
// of the timeline's hard rules: one visible notice under it naming each
// such rule and what matched (dedupe key run:N:rule-check, so once per
// answer). The rules are those the run's prompt was built with (read
// again only when the build did not read them). It runs after the
// answer's commit; a failure is logged, never the answer's.
func (e *execution) checkAnswer(ctx context.Context, answer string) {
	s, timeline := e.s, e.run.TimelineScope
	if s.opts.ContextStore == nil || answer == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ruleCheckTimeout)
	defer cancel()
	cs := e.rules
	var err error
	if !e.rulesRead {
		if cs, err = s.opts.ContextStore.ListConstraints(ctx, timeline); err != nil {
			s.log.Warn("rule check: rules not read", "run_id", e.run.ID, "err", err)
			return
		}
	}
	text := ruleCheckNotice(cs, answer)
	if text == "" {
		return
	}
	_, _, err = s.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: timeline, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: text, DedupeKey: fmt.Sprintf("run:%d:rule-check", e.run.ID), ReplyTo: e.trigger.ID,
		Metadata: services.MessageMeta{RunID: e.run.ID, ReplyTo: e.trigger.ID, Notice: services.NoticeRuleCheck}.Encode(),
	})
	if err != nil {
		s.log.Error("rule check: notice not posted", "run_id", e.run.ID, "err", err)
	}
}

// maxQuotedMatch bounds the matched text a notice quotes.
const maxQuotedMatch = 60

// ruleCheckNotice is the notice for an answer: a line per hard rule whose
// check pattern matches it ("" when none does).
func ruleCheckNotice(cs []services.Constraint, answer string) string {
	var lines []string
	for _, c := range cs {
		if !c.Hard || c.Check == "" {
			continue
		}
		m, ok := services.RuleCheckMatch(c.Check, answer)
		if !ok {
			continue
		}
		if r := []rune(m); len(r) > maxQuotedMatch {
			m = string(r[:maxQuotedMatch]) + "…"
		}
		lines = append(lines, fmt.Sprintf("This answer may break your rule %q (it contains '%s').", c.Text, m))
	}
	return strings.Join(lines, "\n")
}
