package prompt_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

// TestRetrievedCapacity: a prompt takes at most 200 retrieved items; the
// lowest-scored beyond are left out and named (CONTEXT_CAPACITY_EXCEEDED),
// and the build goes on.
func TestRetrievedCapacity(t *testing.T) {
	t.Parallel()
	s := dbtest.Store(t)
	var items []prompt.RetrievedItem
	for i := range 250 {
		items = append(items, prompt.RetrievedItem{TimelineScope: "global", Kind: "handoff", Title: fmt.Sprintf("h%d", i),
			Text: "x", Score: 1 - float64(i)/1000})
	}
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 200000})
	pv, err := m.Preview(context.Background(), prompt.BuildParams{TimelineScope: "global", ContextScope: services.MainScope, Retrieved: items})
	if err != nil {
		t.Fatal(err)
	}
	var msg string
	for _, w := range pv.Warnings {
		if w.Code == services.CodeCapacityExceeded {
			msg = w.Message
		}
	}
	if !strings.Contains(msg, "250 retrieved items") || !strings.Contains(msg, "the 50 lowest-scored left out") {
		t.Fatalf("warnings: %+v", pv.Warnings)
	}
	text := pv.Layers[3].Text
	if !strings.Contains(text, "handoff: h199\n") || strings.Contains(text, "handoff: h200\n") {
		t.Fatalf("retrieved layer kept the wrong items: …%s", text[max(len(text)-200, 0):])
	}
}

// TestDefaultBudgetIsPolicy: the default profile is Policy's numbers, so a
// timeline without a stored profile gets the prompts it got before.
func TestDefaultBudgetIsPolicy(t *testing.T) {
	def := services.DefaultContextBudget()
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range prompt.Layers()[1:] {
		p := prompt.Policy(l)
		if lb := def.Layers[string(l)]; lb.SharePercent != p.SharePercent || lb.MinTokens != p.MinTokens {
			t.Errorf("%s: profile %+v, policy %+v", l, lb, p)
		}
	}
	// A profile's minimum is the floor of the first trimming pass.
	needs := map[prompt.Layer]int{prompt.LayerSystem: 1000, prompt.LayerRules: 500, prompt.LayerSettings: 1000, prompt.LayerRetrieved: 5000,
		prompt.LayerHistory: 50000, prompt.LayerInput: 1000, prompt.LayerTodo: 500}
	def.Layers["retrieved"] = services.LayerBudget{SharePercent: 25, MinTokens: 1500}
	alloc, _ := prompt.AllocateWith(def, 7000, needs)
	if alloc[prompt.LayerRetrieved] != 1500 || alloc[prompt.LayerSettings] != 200 || alloc[prompt.LayerHistory] != 2300 {
		t.Fatalf("alloc with retrieved's minimum 1500: %v", alloc)
	}
	bad := services.DefaultContextBudget()
	bad.Layers["rules"] = services.LayerBudget{SharePercent: 900}
	if _, warns := prompt.AllocateWith(bad, 6000, needs); len(warns) == 0 || warns[0].Code != prompt.CodeBudgetFallback {
		t.Fatalf("an invalid profile: %+v", warns)
	}
}
