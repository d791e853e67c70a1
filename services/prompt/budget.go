package prompt

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// Machine codes of the ContextManager (seed 001). They travel as Warning.Code
// and as services.Error.Code; CodeKind maps each to an error kind.
const (
	// CodeInputTooLarge: the current input alone does not fit the budget, or
	// exceeds MaxInputTokens. The request should be refused, not truncated.
	CodeInputTooLarge = "CONTEXT_INPUT_TOO_LARGE"
	// CodeBackpressure: too many prompt builds at once; retry later.
	CodeBackpressure = "CONTEXT_BACKPRESSURE"
	// CodeScopeViolation: content from another timeline or context scope was
	// about to enter a prompt and was refused.
	CodeScopeViolation = "CONTEXT_SCOPE_VIOLATION"
	// CodeRulesOverbudget: the rules layer exceeds its share, or had to be cut.
	CodeRulesOverbudget = "CONTEXT_RULES_OVERBUDGET"
	// CodeBudgetFallback: counts or budgets fell back to defaults or estimates
	// (tokenizer unavailable, invalid layer counts).
	CodeBudgetFallback = "CONTEXT_BUDGET_FALLBACK"
	// CodeBudgetConflict: a budget configuration update lost an optimistic-lock race.
	CodeBudgetConflict = "CONTEXT_BUDGET_CONFLICT"
	// CodeSummaryTimeout: the summary call of a compaction did not answer
	// within CompactionConfig.Timeout; nothing moved.
	CodeSummaryTimeout = "CONTEXT_SUMMARY_TIMEOUT"
	// CodePinMissing: a pin of the context manifest names a file or section
	// the workspace does not have (or lines past its end); it was skipped.
	CodePinMissing = "CONTEXT_PIN_MISSING"
	// CodePinTrimmed: a pin did not fit the retrieved layer's budget and
	// was left out of this prompt.
	CodePinTrimmed = "CONTEXT_PIN_TRIMMED"
	// CodeRulesTrimmed: the rules did not all fit the rules layer's
	// budget; the owner's own rules were kept first, then the ones most
	// relevant to the input, and the warning names the rest.
	CodeRulesTrimmed = "CONTEXT_RULES_TRIMMED"
	// CodeManifestInvalid: the context manifest could not be read (not
	// valid JSON of its shape); its pins were skipped.
	CodeManifestInvalid = services.CodeManifestInvalid
	// CodeSourceUnavailable: a source of the prompt failed (the recall
	// index, the remembered settings, the manifest file, a pinned file
	// that cannot be read); it was skipped, named, and the prompt built
	// without it.
	CodeSourceUnavailable = "CONTEXT_SOURCE_UNAVAILABLE"
)

// CodeKind returns the services error kind for a ContextManager code, and
// services.EINTERNAL for unknown codes.
func CodeKind(code string) string {
	switch code {
	case CodeInputTooLarge:
		return services.ETOOLARGE
	case CodeBackpressure:
		return services.ERATELIMITED
	case CodeScopeViolation:
		return services.EUNAUTHORIZED
	case CodeRulesOverbudget:
		return services.EINVALID
	case CodeBudgetFallback:
		return services.EUNAVAILABLE
	case CodeBudgetConflict:
		return services.ECONFLICT
	case CodeSummaryTimeout:
		return services.EUNAVAILABLE
	case CodePinMissing:
		return services.ENOTFOUND
	case CodePinTrimmed, CodeRulesTrimmed:
		return services.ETOOLARGE
	case CodeManifestInvalid:
		return services.EINVALID
	case services.CodeCapacityExceeded:
		return services.EINVALID
	case CodeSourceUnavailable:
		return services.EUNAVAILABLE
	}
	return services.EINTERNAL
}

// Warning is a non-fatal finding of budget allocation or prompt compilation.
// Message contains numbers, layer names and workspace paths only, never
// message text.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Err returns the warning as a *services.Error whose kind follows CodeKind,
// for callers that decide to refuse the request (CodeInputTooLarge).
func (w Warning) Err() *services.Error {
	return services.CodedErrorf(CodeKind(w.Code), w.Code, "%s", w.Message)
}

// Layer names one part of a compiled prompt.
type Layer string

// Prompt layers, in prompt order (DESIGN.md, seeds 001 and 002).
const (
	LayerSystem    Layer = "system"    // system prompt and tool definitions
	LayerRules     Layer = "rules"     // rules file and owner constraints
	LayerSettings  Layer = "settings"  // remembered preferences
	LayerRetrieved Layer = "retrieved" // handoffs, referenced lines/blocks, search hits
	LayerHistory   Layer = "history"   // summary segments and recent whole turns
	LayerInput     Layer = "input"     // current user input with @file reminders
	LayerTodo      Layer = "todo"      // todo recap
)

// Layers returns every layer in prompt order.
func Layers() []Layer {
	return []Layer{LayerSystem, LayerRules, LayerSettings, LayerRetrieved, LayerHistory, LayerInput, LayerTodo}
}

// LayerPolicy is the fixed budget policy of one layer.
//
// Numbers (seed 001, "Token 预算管理"): rules 15% / min 500 / never trimmed,
// settings 10% / 200, retrieved 25% / 0, immediate 50% / 2000 trimmed last.
// Switchboard splits 001's immediate layer into history 38%, input 10% and
// todo 2%; the 2000-token minimum goes to history because input is never
// trimmed, and todo gets a 200-token floor like settings. As in 001, shares
// are of the budget left after the system prompt, which is reserved first.
type LayerPolicy struct {
	// SharePercent is the layer's default share of the budget after the system
	// layer; it is the cap used when the layer's count is unknown (fallback
	// profile). The system layer's fallback is SystemFallbackPercent of total.
	SharePercent int
	// MinTokens is the floor the first trimming pass stops at.
	MinTokens int
	// Trimmable layers are cut in TrimOrder; the others only as a last resort.
	Trimmable bool
}

// SystemFallbackPercent is the share of the total assumed for the system layer
// when its count is unknown.
const SystemFallbackPercent = 10

// MaxInputTokens is the largest current input accepted (seed 001, capacity:
// "单次组装最大 token 输入：64k"); larger inputs get CodeInputTooLarge.
const MaxInputTokens = 64_000

// RulesWarnPercent: a rules layer above this share of the budget after the
// system layer gets CodeRulesOverbudget (seed 001).
const RulesWarnPercent = 15

// Policy returns the budget policy of l; the zero policy for unknown layers.
func Policy(l Layer) LayerPolicy {
	switch l {
	case LayerSystem:
		return LayerPolicy{}
	case LayerRules:
		return LayerPolicy{SharePercent: 15, MinTokens: 500}
	case LayerSettings:
		return LayerPolicy{SharePercent: 10, MinTokens: 200, Trimmable: true}
	case LayerRetrieved:
		return LayerPolicy{SharePercent: 25, MinTokens: 0, Trimmable: true}
	case LayerHistory:
		return LayerPolicy{SharePercent: 38, MinTokens: 2000, Trimmable: true}
	case LayerInput:
		return LayerPolicy{SharePercent: 10}
	case LayerTodo:
		return LayerPolicy{SharePercent: 2, MinTokens: 200, Trimmable: true}
	}
	return LayerPolicy{}
}

// TrimOrder returns the trimmable layers in the order they are cut: seed 001's
// lowest priority first (retrieved, settings, then the immediate layers). The
// untrimmable layers follow as a last resort: rules, then input, then system.
func TrimOrder() []Layer {
	return []Layer{LayerRetrieved, LayerSettings, LayerHistory, LayerTodo, LayerRules, LayerInput, LayerSystem}
}

// Allocate distributes total tokens among layers that need needs[l] tokens.
// Each alloc[l] is at most needs[l] and the sum never exceeds total. When the
// needs fit, every layer gets its need. Otherwise layers are cut in TrimOrder:
// first each trimmable layer down to its MinTokens, then to zero, and only
// then rules (CodeRulesOverbudget), input (CodeInputTooLarge) and system. The
// caller trims each layer's content to its allocation in the layer's own way
// (retrieved by score, settings by confidence, history oldest turn first).
//
// Warnings: CodeRulesOverbudget when rules exceed RulesWarnPercent;
// CodeInputTooLarge when input exceeds MaxInputTokens or does not fit;
// CodeBudgetFallback for negative counts (the layer is capped at its default
// share) and for unknown layers (ignored). At most one warning per code.
func Allocate(total int, needs map[Layer]int) (alloc map[Layer]int, warnings []Warning) {
	return AllocateWith(services.DefaultContextBudget(), total, needs)
}

// AllocateWith is Allocate under a budget profile (a timeline's stored
// one, services.ContextBudgets): its shares and minimums replace Policy's.
// The minimums are the floors of the first trimming pass (in TrimOrder,
// which a profile does not change: seed 001 trims retrieved first); the
// shares are the threshold of the rules warning (the rules' share) and the
// cap of a layer whose count is not valid. A profile that is not valid is
// not used (the default is, with CodeBudgetFallback).
func AllocateWith(profile services.ContextBudget, total int, needs map[Layer]int) (alloc map[Layer]int, warnings []Warning) {
	var w warningSet
	if err := profile.Validate(); err != nil {
		w.add(CodeBudgetFallback, "budget profile not used, the default is: %s", services.ErrorMessage(err))
		profile = services.DefaultContextBudget()
	}
	policy := func(l Layer) LayerPolicy {
		p := Policy(l)
		if lb, ok := profile.Layers[string(l)]; ok {
			p.SharePercent, p.MinTokens = lb.SharePercent, lb.MinTokens
		}
		return p
	}
	rulesWarn := policy(LayerRules).SharePercent
	total = max(total, 0)

	var unknown []string
	for l := range needs {
		if !slices.Contains(Layers(), l) {
			unknown = append(unknown, string(l))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		w.add(CodeBudgetFallback, "unknown layers ignored: %s", strings.Join(unknown, ", "))
	}

	need := make(map[Layer]int, len(Layers()))
	var invalid []string
	sys := min(needs[LayerSystem], maxLayerTokens)
	if sys < 0 {
		invalid = append(invalid, string(LayerSystem))
		sys = total * SystemFallbackPercent / 100
	}
	need[LayerSystem] = sys
	rest := max(total-sys, 0)
	for _, l := range Layers()[1:] {
		n := min(needs[l], maxLayerTokens)
		if n < 0 {
			invalid = append(invalid, string(l))
			n = rest * policy(l).SharePercent / 100
		}
		need[l] = n
	}
	if len(invalid) > 0 {
		w.add(CodeBudgetFallback, "negative token counts for %s, default shares used", strings.Join(invalid, ", "))
	}

	if r := need[LayerRules]; r > rest*rulesWarn/100 {
		w.add(CodeRulesOverbudget, "rules need %d tokens, over %d%% of %d", r, rulesWarn, rest)
	}
	if in := need[LayerInput]; in > MaxInputTokens {
		w.add(CodeInputTooLarge, "input needs %d tokens, limit is %d", in, MaxInputTokens)
	}

	alloc = make(map[Layer]int, len(need))
	excess := -total
	for l, n := range need {
		alloc[l] = n
		excess += n
	}
	if excess <= 0 {
		return alloc, w.list
	}
	cut := func(l Layer, floor int) {
		c := min(excess, alloc[l]-min(floor, alloc[l]))
		if c > 0 {
			alloc[l] -= c
			excess -= c
		}
	}
	for _, l := range TrimOrder() {
		if p := policy(l); p.Trimmable {
			cut(l, p.MinTokens)
		}
	}
	for _, l := range TrimOrder() {
		if excess <= 0 {
			break
		}
		before := alloc[l]
		cut(l, 0)
		if alloc[l] == before || Policy(l).Trimmable {
			continue
		}
		switch l {
		case LayerRules:
			w.add(CodeRulesOverbudget, "rules cut from %d to %d tokens to fit %d", need[l], alloc[l], total)
		case LayerInput, LayerSystem:
			w.add(CodeInputTooLarge, "%s cut from %d to %d tokens to fit %d", l, need[l], alloc[l], total)
		}
	}
	return alloc, w.list
}

// maxLayerTokens caps a layer's need so that sums cannot overflow; no model
// window comes near it.
const maxLayerTokens = 1 << 40

// warningSet keeps at most one warning per code, joining later messages.
type warningSet struct{ list []Warning }

func (s *warningSet) add(code, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for i := range s.list {
		if s.list[i].Code == code {
			s.list[i].Message += "; " + msg
			return
		}
	}
	s.list = append(s.list, Warning{Code: code, Message: msg})
}
