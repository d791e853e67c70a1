package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services/prompt"
)

// payloadFixture is a payload with every part: a long rules file, hard,
// given and soft constraints, settings and five observations of falling
// score, each 600 characters.
func payloadFixture() TaskPayload {
	p := TaskPayload{Version: 2, Task: "Summarise the build failures of this week.",
		RulesFiles: []prompt.RulesFile{{Name: "RULES.md", Text: strings.Repeat("Never push to main without review. ", 40)}},
		Constraints: PayloadConstraints{Hard: []string{"Never delete files."}, Given: []string{"Answer in English."},
			Soft: []string{"Prefer short answers.", "Use tables for numbers."}},
		Settings: []PayloadSetting{{Key: "language", Value: "English", Confidence: 0.9}, {Key: "editor", Value: "vim", Confidence: 0.5}},
		Budget:   PayloadBudget{PromptTokens: 16000, MaxSteps: 8, TimeoutSec: 180}}
	for i := 0; i < 5; i++ {
		p.Observations = append(p.Observations, Observation{Source: fmt.Sprintf("m%d", 10+i), Kind: "message", Role: "user",
			Date: "2026-03-01 10:00Z", Score: 0.5 - float64(i)/10, Text: strings.Repeat(fmt.Sprintf("observation %d text ", i), 30)})
	}
	return p
}

// sizeOf counts the payload without its downgrade record, as the budget does.
func sizeOf(p TaskPayload) int {
	p.Downgrade = nil
	return prompt.HeuristicTokenizer{}.Count(string(mustJSON(p)))
}

// fitAt runs fitPayload with the budget at which the fixture, shrunk by
// shrink, would just fit.
func fitAt(t *testing.T, shrink func(*TaskPayload)) TaskPayload {
	t.Helper()
	target := payloadFixture()
	shrink(&target)
	p := payloadFixture()
	p.Budget.PayloadTokens = sizeOf(target) + 5
	fitPayload(&p, prompt.HeuristicTokenizer{}.Count)
	if n := sizeOf(p); n > p.Budget.PayloadTokens && p.Downgrade[len(p.Downgrade)-1].Step != StepOverBudget {
		t.Fatalf("payload %d tokens over its budget %d: %+v", n, p.Budget.PayloadTokens, p.Downgrade)
	}
	return p
}

func steps(p TaskPayload) string {
	var s []string
	for _, d := range p.Downgrade {
		s = append(s, d.Step)
		if d.TokensAfter >= d.TokensBefore && d.Step != StepOverBudget {
			panic(fmt.Sprintf("step %s did not shrink the payload: %+v", d.Step, d))
		}
	}
	return strings.Join(s, ",")
}

func TestPayloadWithinBudgetIsWhole(t *testing.T) {
	p := payloadFixture()
	p.Budget.PayloadTokens = 9999
	p.Budget.PayloadTokens = sizeOf(p)
	fitPayload(&p, prompt.HeuristicTokenizer{}.Count)
	if len(p.Downgrade) != 0 || len(p.Observations) != 5 || len(p.Settings) != 2 {
		t.Fatalf("a payload within budget was shrunk: %+v", p.Downgrade)
	}
}

// Step 1: the lowest-scored observations go first, only as many as needed.
func TestPayloadDropsObservationsByScore(t *testing.T) {
	p := fitAt(t, func(p *TaskPayload) { p.Observations = p.Observations[:3] })
	if got := steps(p); got != StepDropObservations {
		t.Fatalf("steps %s", got)
	}
	if len(p.Observations) != 3 || p.Observations[0].Source != "m10" || p.Observations[2].Source != "m12" {
		t.Fatalf("kept %+v", p.Observations)
	}
	if d := p.Downgrade[0].Detail; !strings.Contains(d, "m14 (0.100)") || !strings.Contains(d, "m13") || strings.Contains(d, "m12") {
		t.Fatalf("detail %q", d)
	}
	if len(p.Settings) != 2 || len(p.Constraints.Soft) != 2 || p.RulesFiles[0].Text != payloadFixture().RulesFiles[0].Text {
		t.Fatalf("rules or settings touched: %+v", p)
	}
}

// Step 2: when the best observation alone is still too much, it is shortened.
func TestPayloadShortensObservations(t *testing.T) {
	p := fitAt(t, func(p *TaskPayload) {
		p.Observations = p.Observations[:1]
		p.Observations[0].Text = truncateText(p.Observations[0].Text, shortObservationRune)
	})
	if got := steps(p); got != StepDropObservations+","+StepShortenObservations {
		t.Fatalf("steps %s", got)
	}
	if len(p.Observations) != 1 || p.Observations[0].Source != "m10" || len([]rune(p.Observations[0].Text)) > shortObservationRune+1 {
		t.Fatalf("kept %+v", p.Observations)
	}
	if len(p.Settings) != 2 {
		t.Fatal("settings dropped before they had to be")
	}
}

// Step 3: only the task and the rules: observations and settings go.
func TestPayloadKeepsOnlyTaskAndConstraints(t *testing.T) {
	p := fitAt(t, func(p *TaskPayload) { p.Observations, p.Settings = nil, nil })
	if got := steps(p); got != StepDropObservations+","+StepShortenObservations+","+StepTaskAndConstraints {
		t.Fatalf("steps %s", got)
	}
	if len(p.Observations) != 0 || len(p.Settings) != 0 {
		t.Fatalf("left %+v %+v", p.Observations, p.Settings)
	}
	want := payloadFixture()
	if p.RulesFiles[0].Text != want.RulesFiles[0].Text || len(p.Constraints.Soft) != 2 || p.Task != want.Task {
		t.Fatalf("rules or task touched: %+v", p)
	}
}

// Step 4 and beyond: soft constraints, then the rules file's text; the
// task, hard and given constraints are never cut, even over budget.
func TestPayloadNeverCutsHardConstraintsOrTheTask(t *testing.T) {
	p := fitAt(t, func(p *TaskPayload) {
		p.Observations, p.Settings, p.Constraints.Soft = nil, nil, nil
		p.RulesFiles[0].Text = p.RulesFiles[0].Text[:200]
	})
	if got := steps(p); got != StepDropObservations+","+StepShortenObservations+","+StepTaskAndConstraints+","+StepCutRules {
		t.Fatalf("steps %s", got)
	}
	want := payloadFixture()
	if len(p.Constraints.Soft) != 0 || !strings.HasSuffix(p.RulesFiles[0].Text, "[cut]") || !strings.HasPrefix(want.RulesFiles[0].Text, strings.TrimSuffix(strings.TrimSuffix(p.RulesFiles[0].Text, " [cut]"), "…")) {
		t.Fatalf("rules: %+v", p.RulesFiles)
	}
	if p.Task != want.Task || strings.Join(p.Constraints.Hard, "|") != "Never delete files." || strings.Join(p.Constraints.Given, "|") != "Answer in English." {
		t.Fatalf("cut what must travel whole: %+v", p)
	}

	tiny := payloadFixture()
	tiny.Budget.PayloadTokens = 10
	fitPayload(&tiny, prompt.HeuristicTokenizer{}.Count)
	if got := steps(tiny); !strings.HasSuffix(got, StepCutRules+","+StepOverBudget) {
		t.Fatalf("steps %s", got)
	}
	if tiny.Task != want.Task || len(tiny.Constraints.Hard) != 1 || len(tiny.Constraints.Given) != 1 {
		t.Fatalf("cut what must travel whole: %+v", tiny)
	}
}

// TestPayloadExampleInDocsMatchesTheCode: the payload shown in
// docs/SUBAGENTS.md decodes into TaskPayload with no unknown field, and
// every field of the code appears in it.
func TestPayloadExampleInDocsMatchesTheCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SUBAGENTS.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, "Its task payload")
	j := strings.Index(text[i:], "```json\n")
	k := strings.Index(text[i+j+8:], "```")
	if i < 0 || j < 0 || k < 0 {
		t.Fatal("no payload example in docs/SUBAGENTS.md")
	}
	example := text[i+j+8 : i+j+8+k]
	dec := json.NewDecoder(strings.NewReader(example))
	dec.DisallowUnknownFields()
	var p TaskPayload
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("the documented payload does not decode: %v\n%s", err, example)
	}
	var round map[string]any
	_ = json.Unmarshal(mustJSON(p), &round)
	for _, field := range []string{"version", "task", "agent_id", "rules_files", "constraints", "settings", "observations", "budget", "downgrade", "parent"} {
		if _, ok := round[field]; !ok {
			t.Fatalf("the documented payload lacks %q", field)
		}
	}
	if p.Version != 2 || p.Observations[0].Source == "" || p.Downgrade[0].Step != StepDropObservations || p.Budget.PayloadTokens == 0 {
		t.Fatalf("documented payload: %+v", p)
	}
}
