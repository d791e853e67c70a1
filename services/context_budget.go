package services

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Codes of the context budget profile (seed 001, budget:get/update).
const (
	// CodeBudgetConflict: an update carried a version that is no longer
	// the stored one; nothing changed.
	CodeBudgetConflict = "CONTEXT_BUDGET_CONFLICT"
	// CodeBudgetFallback: the stored profile could not be used (not valid,
	// or not readable); the default profile was used instead.
	CodeBudgetFallback = "CONTEXT_BUDGET_FALLBACK"
	// CodeBudgetInvalid: a profile update that is not valid (refused).
	CodeBudgetInvalid = "CONTEXT_BUDGET_INVALID"
	// CodeCapacityExceeded: more retrieved chunks or rule entries than a
	// prompt takes (MaxRetrievedChunks, MaxRuleEntries).
	CodeCapacityExceeded = "CONTEXT_CAPACITY_EXCEEDED"
)

// Capacity limits of one prompt (seed 001, "Capacity").
const (
	// MaxRetrievedChunks bounds the items of the retrieved layer; more are
	// left out, named, with CONTEXT_CAPACITY_EXCEEDED.
	MaxRetrievedChunks = 200
	// MaxRuleEntries bounds a timeline's rules: the 501st is refused
	// (EINVALID, CONTEXT_CAPACITY_EXCEEDED), and a prompt takes at most
	// that many rule entries (rules files and constraints).
	MaxRuleEntries = 500
)

// BudgetLayers are the layers a budget profile sets, in prompt order (the
// system layer is always reserved first and has no share).
var BudgetLayers = []string{"rules", "settings", "retrieved", "history", "input", "todo"}

// maxLayerMinTokens bounds a layer's minimum in a profile.
const maxLayerMinTokens = 1_000_000

// LayerBudget is one layer's part of a budget profile: its share of the
// budget left after the system prompt (percent) and the tokens it keeps
// before the layers after it in the trim order are cut.
type LayerBudget struct {
	SharePercent int `json:"share_percent"`
	MinTokens    int `json:"min_tokens"`
}

// ContextBudget is a timeline's budget profile: per layer its share and
// minimum. Version counts the stored updates (0: none stored, the default
// profile). An update carries the version it read and is refused
// (CONTEXT_BUDGET_CONFLICT) when another came first. The trim order is
// not part of it: it is fixed (docs/CONTEXT.md, "Budget").
type ContextBudget struct {
	Version int                    `json:"version"`
	Layers  map[string]LayerBudget `json:"layers"`
}

// DefaultContextBudget is the profile used when none is stored, or the
// stored one is not valid: prompt.Policy's numbers.
func DefaultContextBudget() ContextBudget {
	return ContextBudget{Layers: map[string]LayerBudget{
		"rules":     {SharePercent: 15, MinTokens: 500},
		"settings":  {SharePercent: 10, MinTokens: 200},
		"retrieved": {SharePercent: 25, MinTokens: 0},
		"history":   {SharePercent: 38, MinTokens: 2000},
		"input":     {SharePercent: 10, MinTokens: 0},
		"todo":      {SharePercent: 2, MinTokens: 200},
	}}
}

// Validate reports, as an EINVALID error (CONTEXT_BUDGET_INVALID) naming
// the layer and the field, why a profile cannot be used: every layer of
// BudgetLayers and no other, shares 0–100 summing to at most 100, minimums
// 0–1,000,000.
func (b ContextBudget) Validate() error {
	bad := func(format string, args ...any) error {
		return CodedErrorf(EINVALID, CodeBudgetInvalid, format, args...)
	}
	if b.Version < 0 {
		return bad("\"version\" %d: want 0 or more", b.Version)
	}
	var unknown, missing []string
	for name := range b.Layers {
		if !slices.Contains(BudgetLayers, name) {
			unknown = append(unknown, name)
		}
	}
	for _, name := range BudgetLayers {
		if _, ok := b.Layers[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		return bad("unknown layer %q: the layers are %s", unknown[0], strings.Join(BudgetLayers, ", "))
	}
	if len(missing) > 0 {
		return bad("layer %q is missing: give every layer (%s)", missing[0], strings.Join(BudgetLayers, ", "))
	}
	sum := 0
	for _, name := range BudgetLayers {
		l := b.Layers[name]
		if l.SharePercent < 0 || l.SharePercent > 100 {
			return bad("layer %q: \"share_percent\" %d: want 0 to 100", name, l.SharePercent)
		}
		if l.MinTokens < 0 || l.MinTokens > maxLayerMinTokens {
			return bad("layer %q: \"min_tokens\" %d: want 0 to %d", name, l.MinTokens, maxLayerMinTokens)
		}
		sum += l.SharePercent
	}
	if sum > 100 {
		return bad("the shares add up to %d%%: at most 100", sum)
	}
	return nil
}

// ParseContextBudget decodes a profile strictly (unknown fields and
// trailing data are errors) and validates it. Errors are EINVALID with
// CONTEXT_BUDGET_INVALID and name the problem.
func ParseContextBudget(data []byte) (ContextBudget, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b ContextBudget
	if err := dec.Decode(&b); err != nil {
		return ContextBudget{}, CodedErrorf(EINVALID, CodeBudgetInvalid, "not a valid budget profile: %s", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return ContextBudget{}, CodedErrorf(EINVALID, CodeBudgetInvalid, "not a valid budget profile: data after the JSON object")
	}
	if err := b.Validate(); err != nil {
		return ContextBudget{}, err
	}
	return b, nil
}

// String is the profile in one line ("rules 15%/500, settings 10%/200, …").
func (b ContextBudget) String() string {
	parts := make([]string, 0, len(BudgetLayers))
	for _, name := range BudgetLayers {
		l := b.Layers[name]
		parts = append(parts, fmt.Sprintf("%s %d%%/%d", name, l.SharePercent, l.MinTokens))
	}
	return strings.Join(parts, ", ")
}

// ContextBudgets read and write the budget profile of a timeline.
type ContextBudgets interface {
	// ContextBudget reads the stored profile: DefaultContextBudget (version
	// 0) when none is stored. A stored profile that is not valid is
	// returned as the default at the stored version, with an EINVALID
	// error coded CONTEXT_BUDGET_FALLBACK naming the problem (a PUT at
	// that version replaces it).
	ContextBudget(ctx context.Context, timelineScope string) (ContextBudget, error)
	// PutContextBudget stores b when b.Version is the stored version
	// (ECONFLICT with CONTEXT_BUDGET_CONFLICT otherwise, nothing changed)
	// and b is valid (EINVALID, CONTEXT_BUDGET_INVALID). It returns the
	// stored profile, whose version is one more.
	PutContextBudget(ctx context.Context, timelineScope string, b ContextBudget) (ContextBudget, error)
}
