package budget_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/budget"
)

// TestParseLimits: BUDGET_DAILY_TOKENS is a JSON object of known kinds and
// positive token counts; anything else is refused naming the problem.
func TestParseLimits(t *testing.T) {
	l, err := budget.ParseLimits(`{"main":200000,"subagent":100000,"schedule":50000}`)
	if err != nil || l[services.BudgetMain] != 200000 || l[services.BudgetSubagent] != 100000 || l[services.BudgetSchedule] != 50000 {
		t.Fatalf("%v %v", l, err)
	}
	if l, err := budget.ParseLimits(" "); err != nil || l != nil {
		t.Fatalf("empty: %v %v", l, err)
	}
	for in, want := range map[string]string{
		`{"cron":5}`:       `unknown kind "cron"`,
		`{"main":0}`:       "positive whole number",
		`{"main":1.5}`:     "positive whole number",
		`{"main":"lots"}`:  "JSON object",
		`[1,2]`:            "JSON object",
		`{"schedule":-10}`: "positive whole number",
	} {
		if _, err := budget.ParseLimits(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
}
