package budget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// Price is one model's price in US dollars per million tokens: prompt
// tokens read fresh (Input), read from the provider's prompt cache
// (CachedInput; default Input), written to it (CacheWrite, Anthropic;
// default Input) and answered (Output).
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input,omitempty"`
	CacheWrite  float64 `json:"cache_write,omitempty"`
	Output      float64 `json:"output"`
}

// Cost is what a call with usage u costs at p, rounded up to the
// micro-dollar. A price per million tokens is a price per token in
// micro-dollars.
func (p Price) Cost(u services.TokenUsage) services.Money {
	cached := max(u.CachedTokens, 0)
	write := max(u.CacheWriteTokens, 0)
	fresh := max(u.PromptTokens-cached-write, 0)
	micros := float64(fresh)*p.Input + float64(cached)*p.CachedInput + float64(write)*p.CacheWrite + float64(max(u.CompletionTokens, 0))*p.Output
	return services.Money(math.Ceil(micros - 1e-9))
}

// Estimate is the most a call of prompt tokens answering up to maxOutput
// can cost: every prompt token at the fresh or cache-write price (the
// higher), no cache hit counted on.
func (p Price) Estimate(prompt, maxOutput int) services.Money {
	in := max(p.Input, p.CacheWrite)
	return services.Money(math.Ceil(float64(max(prompt, 0))*in + float64(max(maxOutput, 0))*p.Output - 1e-9))
}

// Prices are model prices by model name (LLM_PRICES over DefaultPrices).
// A name matches a model exactly, or a dated snapshot of it
// ("gpt-4o" matches "gpt-4o-2024-08-06", "claude-sonnet-4" matches
// "claude-sonnet-4-20250514") or its "-latest" alias; a name ending in
// "*" matches every model it begins (the longest such name wins).
type Prices map[string]Price

// DefaultPrices are the list prices (USD per million tokens) the providers
// published in 2025 for common models; LLM_PRICES adds models and
// overrides these. CacheWrite is Anthropic's 5-minute cache write (the
// service's breakpoints are ephemeral, 5 minutes); OpenAI has none (0).
// docs/OPERATIONS.md lists them, and where each row comes from (the
// source of most OpenAI rows was not recorded); TestBuiltInPrices* keep
// the list and the units true.
var DefaultPrices = Prices{
	"gpt-4o":            {Input: 2.50, CachedInput: 1.25, Output: 10},
	"gpt-4o-mini":       {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"gpt-4.1":           {Input: 2.00, CachedInput: 0.50, Output: 8},
	"gpt-4.1-mini":      {Input: 0.40, CachedInput: 0.10, Output: 1.60},
	"gpt-4.1-nano":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"gpt-5":             {Input: 1.25, CachedInput: 0.125, Output: 10},
	"gpt-5-mini":        {Input: 0.25, CachedInput: 0.025, Output: 2},
	"gpt-5-nano":        {Input: 0.05, CachedInput: 0.005, Output: 0.40},
	"o4-mini":           {Input: 1.10, CachedInput: 0.275, Output: 4.40},
	"claude-opus-4":     {Input: 15, CachedInput: 1.50, CacheWrite: 18.75, Output: 75},
	"claude-opus-4-1":   {Input: 15, CachedInput: 1.50, CacheWrite: 18.75, Output: 75},
	"claude-sonnet-4":   {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
	"claude-sonnet-4-5": {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
	"claude-haiku-4-5":  {Input: 1, CachedInput: 0.10, CacheWrite: 1.25, Output: 5},
	"claude-3-7-sonnet": {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, CacheWrite: 1, Output: 4},
}

// snapshotRE is what may follow a price's name in a model's: a date
// (-2024-08-06, -20250514) or -latest.
var snapshotRE = regexp.MustCompile(`^-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// Lookup finds model's price.
func (ps Prices) Lookup(model string) (Price, bool) {
	if p, ok := ps[model]; ok {
		return p, true
	}
	best, found := "", false
	for name := range ps {
		var ok bool
		if prefix, wild := strings.CutSuffix(name, "*"); wild {
			ok = strings.HasPrefix(model, prefix)
		} else {
			ok = strings.HasPrefix(model, name) && snapshotRE.MatchString(model[len(name):])
		}
		if ok && (!found || len(name) > len(best)) {
			best, found = name, true
		}
	}
	return ps[best], found
}

// ParsePrices reads LLM_PRICES, a JSON object of model names and prices in
// US dollars per million tokens:
//
//	{"gpt-4o":{"input":2.5,"cached_input":1.25,"output":10},"my-model*":{"input":1,"output":2}}
//
// and returns them over DefaultPrices. Every error names the entry.
func ParsePrices(s string) (Prices, error) {
	out := Prices{}
	for k, v := range DefaultPrices {
		out[k] = v
	}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf(`want a JSON object of models and prices in USD per million tokens, such as {"gpt-4o":{"input":2.5,"cached_input":1.25,"output":10}}: %v`, err)
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.TrimSpace(name) == "" || strings.Count(name, "*") > 1 || (strings.Contains(name, "*") && !strings.HasSuffix(name, "*")) {
			return nil, fmt.Errorf("model %q: want a model name, or a prefix ending in * (e.g. \"my-model*\")", name)
		}
		var f map[string]*float64
		dec := json.NewDecoder(bytes.NewReader(raw[name]))
		if err := dec.Decode(&f); err != nil || f == nil {
			return nil, fmt.Errorf(`model %q: want {"input":…,"cached_input":…,"output":…} in USD per million tokens, got %s`, name, raw[name])
		}
		var p Price
		for field, v := range f {
			if v == nil || *v < 0 || math.IsNaN(*v) || *v > 10000 {
				return nil, fmt.Errorf("model %q: %s: want a price of 0 to 10000 USD per million tokens", name, field)
			}
			switch field {
			case "input":
				p.Input = *v
			case "cached_input":
				p.CachedInput = *v
			case "cache_write":
				p.CacheWrite = *v
			case "output":
				p.Output = *v
			default:
				return nil, fmt.Errorf("model %q: unknown field %q (want input, cached_input, cache_write, output)", name, field)
			}
		}
		if f["input"] == nil || f["output"] == nil {
			return nil, fmt.Errorf("model %q: input and output prices are required (USD per million tokens)", name)
		}
		if f["cached_input"] == nil {
			p.CachedInput = p.Input
		}
		if f["cache_write"] == nil {
			p.CacheWrite = p.Input
		}
		out[name] = p
	}
	return out, nil
}

// MoneyLimits are the daily money budgets per kind (BUDGET_DAILY_USD).
type MoneyLimits map[services.BudgetKind]services.Money

// ParseMoneyLimits reads BUDGET_DAILY_USD: a JSON object of kinds and
// positive amounts of US dollars, e.g. {"main":5,"subagent":2,"schedule":0.5}.
func ParseMoneyLimits(s string) (MoneyLimits, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var raw map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf(`want a JSON object of kinds and US dollars such as {"main":5,"schedule":0.5}: %v`, err)
	}
	out := MoneyLimits{}
	for k, v := range raw {
		kind := services.BudgetKind(k)
		if !knownKind(kind) {
			return nil, fmt.Errorf("unknown kind %q (want main, subagent or schedule)", k)
		}
		f, err := v.Float64()
		if err != nil || f <= 0 || f > 1e6 {
			return nil, fmt.Errorf("%s: want a positive amount of US dollars (at most 1000000), got %s", k, v)
		}
		out[kind] = services.MoneyFromUSD(f)
	}
	return out, nil
}

// CheckPriced refuses money budgets when a model the service calls has no
// price: it could not be counted against them.
func CheckPriced(limits MoneyLimits, prices Prices, models ...string) error {
	if len(limits) == 0 {
		return nil
	}
	for _, m := range models {
		if m == "" {
			continue
		}
		if _, ok := prices.Lookup(m); !ok {
			return fmt.Errorf(`BUDGET_DAILY_USD is set but model %q has no price: add it to LLM_PRICES, e.g. {%q:{"input":1,"cached_input":0.5,"output":4}} (USD per million tokens)`, m, m)
		}
	}
	return nil
}
