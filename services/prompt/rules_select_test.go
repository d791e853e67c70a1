package prompt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

// approvedRule stores text as the agent's proposal and approves it: a rule
// that is not the owner's own.
func approvedRule(t *testing.T, s interface {
	services.RuleProposals
}, text string) int64 {
	t.Helper()
	ctx := context.Background()
	p, err := s.ProposeRule(ctx, services.RuleProposal{TimelineScope: "global", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.DecideRuleProposal(ctx, "global", p.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	return d.ConstraintID
}

// TestRulesOverShareKeepOwnersThenRelevant: rules over their share keep
// the owner's own first, then the agent's approved proposals most relevant
// to the input; the left-out ones are named (CONTEXT_RULES_TRIMMED) and
// marked in the explained sources. Rules that fit are all sent, in order.
func TestRulesOverShareKeepOwnersThenRelevant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	own, err := s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: "Answer in French.", Hard: true})
	if err != nil {
		t.Fatal(err)
	}
	topics := []string{"gardening tomatoes", "invoices and taxes", "cycling routes", "python scripts", "wine pairing", "train timetables"}
	ids := map[string]int64{}
	for _, tp := range topics {
		ids[tp] = approvedRule(t, s, fmt.Sprintf("When the owner asks about %s, %s", tp, strings.Repeat("give a careful, detailed and sourced answer with examples. ", 12)))
	}
	trigger, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web",
		Content: "Which invoices do I need for my taxes this year?", Visible: true})
	if err != nil {
		t.Fatal(err)
	}
	tok := prompt.HeuristicTokenizer{}
	// A window whose rules share (15 %) holds the owner's rule and about
	// two of the six long proposals.
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Tokenizer: tok}, prompt.Config{Window: 6000})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger.ID, Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	sys := p.Request.System
	if !strings.Contains(sys, "- [hard] Answer in French.") {
		t.Fatalf("the owner's rule was left out:\n%s", sys)
	}
	if !strings.Contains(sys, "invoices and taxes") {
		t.Fatalf("the rule most relevant to the input was left out:\n%s", sys)
	}
	var warn string
	for _, w := range p.Inspection.Warnings {
		if w.Code == prompt.CodeRulesTrimmed {
			warn = w.Message
		}
	}
	if warn == "" {
		t.Fatalf("no %s warning: %+v", prompt.CodeRulesTrimmed, p.Inspection.Warnings)
	}
	left := 0
	for _, tp := range topics {
		name := fmt.Sprintf("rule #%d (soft)", ids[tp])
		in := strings.Contains(sys, tp)
		if in == strings.Contains(warn, name) {
			t.Errorf("%s: in prompt %v, named left out %v (%s)", tp, in, !in, warn)
		}
		if !in {
			left++
		}
	}
	if left < 2 || strings.Contains(warn, fmt.Sprintf("rule #%d ", own.ID)) {
		t.Fatalf("left out %d; warning %s", left, warn)
	}
	var rules prompt.LayerReport
	for _, l := range p.Inspection.Layers {
		if l.Layer == prompt.LayerRules {
			rules = l
		}
	}
	if rules.Trimmed != left || !strings.Contains(rules.Reason, "relevance") {
		t.Fatalf("rules layer: %+v, want %d trimmed", rules, left)
	}
	checkRulesExample(t, p.Inspection)
	for _, src := range p.Inspection.Sources {
		if src.Layer != prompt.LayerRules {
			continue
		}
		if strings.Contains(warn, src.Source) == src.Included {
			t.Errorf("source %+v vs warning %s", src, warn)
		}
	}
	// The owner's rule is kept whatever the input; another input keeps
	// another proposal.
	trigger2, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web",
		Content: "Plan me cycling routes for the weekend", Visible: true})
	p2, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger2.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p2.Request.System, "cycling routes") || !strings.Contains(p2.Request.System, "Answer in French.") {
		t.Fatalf("second input's prompt:\n%s", p2.Request.System)
	}

	// With a window whose share holds them all, every rule is sent in its
	// order and nothing is named.
	big := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Tokenizer: tok}, prompt.Config{Window: 64000})
	p3, err := big.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger.ID})
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, tp := range append([]string{"Answer in French."}, topics...) {
		i := strings.Index(p3.Request.System, tp)
		if i <= last {
			t.Fatalf("%q at %d after %d:\n%s", tp, i, last, p3.Request.System)
		}
		last = i
	}
	for _, w := range p3.Inspection.Warnings {
		if w.Code == prompt.CodeRulesTrimmed {
			t.Fatalf("rules that fit named trimmed: %s", w.Message)
		}
	}
}

// TestOwnersRulesOverBudgetByRelevance: when even the owner's own rules
// cannot all fit the prompt, the ones most relevant to the input stay.
func TestOwnersRulesOverBudgetByRelevance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	filler := strings.Repeat("Keep this in mind in every answer you write. ", 60)
	var ids []int64
	for _, tp := range []string{"mushrooms", "sailing", "mortgage rates", "chess openings"} {
		c, err := s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: "About " + tp + ": " + filler, Hard: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	trigger, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web",
		Content: "What are mortgage rates doing?", Visible: true})
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Tokenizer: prompt.HeuristicTokenizer{}}, prompt.Config{Window: 2000})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger.ID})
	if err != nil {
		t.Fatal(err)
	}
	if p.Inspection.TotalTokens > p.Inspection.Budget {
		t.Fatalf("%d tokens over budget %d", p.Inspection.TotalTokens, p.Inspection.Budget)
	}
	if !strings.Contains(p.Request.System, "About mortgage rates") || strings.Contains(p.Request.System, "…[cut]") {
		t.Fatalf("the relevant rule is not whole in the prompt:\n%s", p.Request.System)
	}
	var warn string
	for _, w := range p.Inspection.Warnings {
		if w.Code == prompt.CodeRulesTrimmed {
			warn = w.Message
		}
	}
	// Ties (no word of the input) keep their order: the last goes first.
	if !strings.Contains(warn, fmt.Sprintf("rule #%d (hard)", ids[3])) || strings.Contains(warn, fmt.Sprintf("rule #%d (hard)", ids[2])) {
		t.Fatalf("warning %q", warn)
	}
}

// checkRulesExample decodes docs/CONTEXT.md's context-rules-trimmed example
// (unknown fields refused) and compares its rules layer's reason and its
// warnings, numbers aside, with a real build's.
func checkRulesExample(t *testing.T, real prompt.Inspection) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(docExample(t, "context-rules-trimmed")))
	dec.DisallowUnknownFields()
	var ex prompt.Preview
	if err := dec.Decode(&ex); err != nil {
		t.Fatalf("rules example: %v", err)
	}
	digits := regexp.MustCompile(`\d+`)
	shape := func(s string) string {
		s, _, _ = strings.Cut(s, ": rule")
		return digits.ReplaceAllString(s, "N")
	}
	var realRules prompt.LayerReport
	for _, l := range real.Layers {
		if l.Layer == prompt.LayerRules {
			realRules = l
		}
	}
	if shape(ex.Layers[0].Reason) != shape(realRules.Reason) || ex.Layers[0].Budget < ex.Layers[0].Tokens {
		t.Errorf("example's rules layer %+v, a build's %+v", ex.Layers[0], realRules)
	}
	want := map[string]string{}
	for _, w := range real.Warnings {
		want[w.Code] = shape(w.Message)
	}
	for _, w := range ex.Warnings {
		if want[w.Code] != shape(w.Message) {
			t.Errorf("example's warning %s %q, a build's %q", w.Code, shape(w.Message), want[w.Code])
		}
	}
	if len(ex.Warnings) != 2 {
		t.Errorf("example's warnings: %+v", ex.Warnings)
	}
}
