package budget_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/budget"
)

// TestBuiltInPricesArePerMillionTokens: the built-in table is in US dollars
// per million tokens, and Cost reads it so. A call of 1,000 prompt and
// 1,000 answer tokens costs what the list prices say (gpt-4o-mini: 1,000 ×
// $0.15/M + 1,000 × $0.60/M = $0.00075; claude-sonnet-4-5: $0.003 +
// $0.015), a million tokens of each kind costs the table's figure, and
// every entry lies where per-million list prices lie: an entry typed per
// thousand tokens or per token, or a cached price above the fresh one,
// fails here.
func TestBuiltInPricesArePerMillionTokens(t *testing.T) {
	for model, want := range map[string]services.Money{
		"gpt-4o-mini":       750,    // µ$
		"claude-sonnet-4-5": 18_000, // µ$
	} {
		p, ok := budget.DefaultPrices.Lookup(model)
		if got := p.Cost(services.TokenUsage{PromptTokens: 1000, CompletionTokens: 1000}); !ok || got != want {
			t.Errorf("%s: 1,000 + 1,000 tokens cost %s (%d µ$), want %d µ$", model, got, got, want)
		}
	}
	const million = 1_000_000
	for model, p := range budget.DefaultPrices {
		for _, c := range []struct {
			kind string
			use  services.TokenUsage
			usd  float64
		}{
			{"input", services.TokenUsage{PromptTokens: million}, p.Input},
			{"cached input", services.TokenUsage{PromptTokens: million, CachedTokens: million}, p.CachedInput},
			{"output", services.TokenUsage{CompletionTokens: million}, p.Output},
		} {
			if got, want := p.Cost(c.use), services.MoneyFromUSD(c.usd); got != want {
				t.Errorf("%s: a million %s tokens cost %s, want the table's $%g", model, c.kind, got, c.usd)
			}
		}
		switch {
		case p.Input < 0.01 || p.Input > 100:
			t.Errorf("%s: input $%g per million tokens is no list price (a unit slip?)", model, p.Input)
		case p.Output < p.Input || p.Output > 10*p.Input:
			t.Errorf("%s: output $%g is not 1 to 10 times input $%g", model, p.Output, p.Input)
		case p.CachedInput <= 0 || p.CachedInput > p.Input || p.CachedInput < p.Input/20:
			t.Errorf("%s: cached input $%g is not 1/20 to 1 times input $%g", model, p.CachedInput, p.Input)
		case p.CacheWrite != 0 && p.CacheWrite != 1.25*p.Input:
			// Anthropic's 5-minute cache write (the service's breakpoints
			// are ephemeral, 5 minutes) is 1.25 × input; OpenAI has none.
			t.Errorf("%s: cache write $%g is not 1.25 × input $%g", model, p.CacheWrite, p.Input)
		}
	}
}

// TestBuiltInPricesAreDocumented: docs/OPERATIONS.md's table of built-in
// prices lists every model of DefaultPrices once, with its prices.
func TestBuiltInPricesAreDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "| model | input | cached input | cache write | output |")
	if !ok {
		t.Fatal("docs/OPERATIONS.md has no table of built-in prices")
	}
	num := func(s string) float64 {
		if s = strings.TrimSpace(s); s == "–" {
			return 0
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("price %q in docs/OPERATIONS.md: %v", s, err)
		}
		return f
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			t.Fatalf("row %q: %d cells, want 5", line, len(cells))
		}
		doc := budget.Price{Input: num(cells[1]), CachedInput: num(cells[2]), CacheWrite: num(cells[3]), Output: num(cells[4])}
		for _, name := range strings.Split(cells[0], ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			p, ok := budget.DefaultPrices[name]
			switch {
			case !ok:
				t.Errorf("docs list %s, which has no built-in price", name)
			case p != doc:
				t.Errorf("%s: docs say %+v, the code %+v", name, doc, p)
			case seen[name]:
				t.Errorf("%s is listed twice", name)
			}
			seen[name] = true
		}
	}
	for name := range budget.DefaultPrices {
		if !seen[name] {
			t.Errorf("%s has a built-in price the docs do not list", name)
		}
	}
}
