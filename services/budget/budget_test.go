package budget_test

import (
	"fmt"
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

// TestParsePrices: LLM_PRICES is a JSON object of models and prices in USD
// per million tokens over the built-in table; a bad entry is refused
// naming the model and the field.
func TestParsePrices(t *testing.T) {
	p, err := budget.ParsePrices(`{"my-model":{"input":1,"output":4},"gpt-4o":{"input":2,"cached_input":0.5,"output":8},"local*":{"input":0,"output":0}}`)
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]string{
		"my-model":                   "true 1 1 1 4", // cached and cache write default to input
		"gpt-4o":                     "true 2 0.5 2 8",
		"gpt-4o-2024-08-06":          "true 2 0.5 2 8", // a dated snapshot
		"gpt-4o-mini":                "true 0.15 0.075 0 0.6",
		"claude-sonnet-4-20250514":   "true 3 0.3 3.75 15",
		"claude-sonnet-4-5-20250929": "true 3 0.3 3.75 15",
		"local-llama-3":              "true 0 0 0 0",
		"gpt-4o-audio-preview":       "false 0 0 0 0", // not a snapshot: no silent price
		"my-model-large":             "false 0 0 0 0",
	} {
		pr, ok := p.Lookup(model)
		if got := fmt.Sprint(ok, pr.Input, pr.CachedInput, pr.CacheWrite, pr.Output); got != want {
			t.Errorf("%s: %s, want %s", model, got, want)
		}
	}
	if d, err := budget.ParsePrices(""); err != nil || len(d) != len(budget.DefaultPrices) {
		t.Fatalf("empty: %d prices, %v", len(d), err)
	}
	for in, want := range map[string]string{
		`{"m":{"input":1}}`:                           `model "m": input and output prices are required`,
		`{"m":{"input":1,"output":-2}}`:               `model "m": output: want a price of 0 to 10000`,
		`{"m":{"input":1,"output":2,"cachd":1}}`:      `model "m": unknown field "cachd"`,
		`{"m":{"input":"1","output":2}}`:              `model "m": want {"input"`,
		`{"m":[1,2,3]}`:                               `model "m": want {"input"`,
		`{"m*x":{"input":1,"output":2}}`:              `model "m*x": want a model name, or a prefix ending in *`,
		`{"":{"input":1,"output":2}}`:                 `model "": want a model name`,
		`gpt-4o=2.5/10`:                               "want a JSON object of models and prices",
		`{"ok":{"input":1,"output":1},"bad":{"x":1}}`: `model "bad": unknown field "x"`,
	} {
		if _, err := budget.ParsePrices(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
}

// TestPriceCost: a call's cost counts fresh, cached and cache-written
// prompt tokens and answer tokens at their prices, in micro-dollars; the
// reservation is the most it can cost.
func TestPriceCost(t *testing.T) {
	p := budget.Price{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
	// 10,000 prompt tokens of which 6,000 cached and 1,000 written, 500 out:
	// 3,000×3 + 6,000×0.3 + 1,000×3.75 + 500×15 = 9,000+1,800+3,750+7,500 µ$.
	if got := p.Cost(services.TokenUsage{PromptTokens: 10000, CachedTokens: 6000, CacheWriteTokens: 1000, CompletionTokens: 500}); got != 22050 {
		t.Fatalf("cost %d µ$, want 22050", got)
	}
	if got := p.Estimate(10000, 1000); got != 10000*3.75+1000*15 {
		t.Fatalf("estimate %d µ$", got)
	}
	if s := services.Money(22050).String(); s != "$0.0221" {
		t.Fatalf("money %q", s)
	}
	if s := services.MoneyFromUSD(2.5).String(); s != "$2.50" {
		t.Fatalf("money %q", s)
	}
}

// TestParseMoneyLimits: BUDGET_DAILY_USD is a JSON object of known kinds
// and positive dollar amounts; a money budget refuses a model without a
// price, naming it.
func TestParseMoneyLimits(t *testing.T) {
	l, err := budget.ParseMoneyLimits(`{"main":5,"schedule":0.25}`)
	if err != nil || l[services.BudgetMain] != 5_000_000 || l[services.BudgetSchedule] != 250_000 {
		t.Fatalf("%v %v", l, err)
	}
	for in, want := range map[string]string{
		`{"cron":5}`:    `unknown kind "cron"`,
		`{"main":0}`:    "positive amount of US dollars",
		`{"main":-1}`:   "positive amount of US dollars",
		`{"main":"$5"}`: "JSON object of kinds and US dollars",
		`{"main":1e9}`:  "at most 1000000",
		`5`:             "JSON object",
	} {
		if _, err := budget.ParseMoneyLimits(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
	if err := budget.CheckPriced(l, budget.DefaultPrices, "gpt-4o-mini", "my-local-model"); err == nil || !strings.Contains(err.Error(), `model "my-local-model" has no price: add it to LLM_PRICES`) {
		t.Fatalf("unpriced model: %v", err)
	}
	if err := budget.CheckPriced(nil, budget.DefaultPrices, "my-local-model"); err != nil {
		t.Fatalf("no money budget: %v", err)
	}
}
