package services

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// Payload modes: what a context payload carries (docs/CONTEXT.md, "The
// context payload").
const (
	PayloadIndex    = "index"
	PayloadTimeline = "timeline"
	PayloadDetail   = "detail"
	PayloadMap      = "map"
)

// PayloadModes are the payload's modes, in the default downgrade order
// (the cheapest first).
var PayloadModes = []string{PayloadIndex, PayloadMap, PayloadTimeline, PayloadDetail}

// PayloadProfile is a budget profile of the context payload (spec 000):
// tokens per mode, per-source caps, top_k per mode and the order a
// payload over its budget downgrades in. A sub-agent profile of
// AGENT_PROFILES may carry one as "context"; fields it leaves out keep
// DefaultPayloadProfile's values.
type PayloadProfile struct {
	Budgets struct {
		Index    int `json:"index_tokens"`
		Timeline int `json:"timeline_tokens"`
		Detail   int `json:"detail_tokens"`
		Map      int `json:"map_tokens"`
	} `json:"budgets"`
	MaxPerSource struct {
		Observations int `json:"observations"`
		RepoMap      int `json:"repo_map"`
		TaskJSON     int `json:"task_json"`
	} `json:"max_per_source_tokens"`
	TopK struct {
		Index    int `json:"index"`
		Timeline int `json:"timeline"`
		Detail   int `json:"detail"`
	} `json:"top_k"`
	// DowngradeOrder lists modes from the cheapest to the richest: a
	// detail payload over its budget steps down to the observation modes
	// before detail in it, the nearest first (map carries no observations
	// and is passed over); a mode not in it is never stepped to.
	DowngradeOrder []string `json:"downgrade_order"`
}

// DefaultPayloadProfile is the profile of every sub-agent type that
// names none: index 1,500, timeline 3,000, detail 6,000, map 2,000
// tokens; per source 5,000 (observations), 2,000 (the map), 500 (the
// task); top_k 20, 30, 10; downgrade order index, map, timeline, detail.
func DefaultPayloadProfile() PayloadProfile {
	var p PayloadProfile
	p.Budgets.Index, p.Budgets.Timeline, p.Budgets.Detail, p.Budgets.Map = 1500, 3000, 6000, 2000
	p.MaxPerSource.Observations, p.MaxPerSource.RepoMap, p.MaxPerSource.TaskJSON = 5000, 2000, 500
	p.TopK.Index, p.TopK.Timeline, p.TopK.Detail = 20, 30, 10
	p.DowngradeOrder = slices.Clone(PayloadModes)
	return p
}

// Bounds of a payload profile's values.
const (
	minPayloadBudget = 100
	maxPayloadTokens = 1_000_000
	maxPayloadTopK   = 1000
)

// Validate names the first field whose value is out of its bounds
// (EINVALID): budgets 100–1,000,000 tokens, per-source caps 1–1,000,000,
// top_k 1–1,000, downgrade_order modes of index, map, timeline, detail,
// none twice, at least one.
func (p PayloadProfile) Validate() error {
	ints := []struct {
		field     string
		v, lo, hi int
	}{
		{"budgets.index_tokens", p.Budgets.Index, minPayloadBudget, maxPayloadTokens},
		{"budgets.timeline_tokens", p.Budgets.Timeline, minPayloadBudget, maxPayloadTokens},
		{"budgets.detail_tokens", p.Budgets.Detail, minPayloadBudget, maxPayloadTokens},
		{"budgets.map_tokens", p.Budgets.Map, minPayloadBudget, maxPayloadTokens},
		{"max_per_source_tokens.observations", p.MaxPerSource.Observations, 1, maxPayloadTokens},
		{"max_per_source_tokens.repo_map", p.MaxPerSource.RepoMap, 1, maxPayloadTokens},
		{"max_per_source_tokens.task_json", p.MaxPerSource.TaskJSON, 1, maxPayloadTokens},
		{"top_k.index", p.TopK.Index, 1, maxPayloadTopK},
		{"top_k.timeline", p.TopK.Timeline, 1, maxPayloadTopK},
		{"top_k.detail", p.TopK.Detail, 1, maxPayloadTopK},
	}
	for _, f := range ints {
		if f.v < f.lo || f.v > f.hi {
			return Errorf(EINVALID, "%s %d: want %d to %d", f.field, f.v, f.lo, f.hi)
		}
	}
	if len(p.DowngradeOrder) == 0 {
		return Errorf(EINVALID, "downgrade_order is empty: want modes of %s, cheapest first", strings.Join(PayloadModes, ", "))
	}
	for i, m := range p.DowngradeOrder {
		if !slices.Contains(PayloadModes, m) {
			return Errorf(EINVALID, "downgrade_order[%d] %q: want one of %s", i, m, strings.Join(PayloadModes, ", "))
		}
		if slices.Contains(p.DowngradeOrder[:i], m) {
			return Errorf(EINVALID, "downgrade_order[%d] %q is listed twice", i, m)
		}
	}
	return nil
}

// UnmarshalJSON reads a profile strictly (unknown fields are errors) over
// DefaultPayloadProfile, so fields left out keep their defaults, and
// validates it; errors name the field.
func (p *PayloadProfile) UnmarshalJSON(data []byte) error {
	type plain PayloadProfile
	out := plain(DefaultPayloadProfile())
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return Errorf(EINVALID, "%s", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(EINVALID, "data after the JSON object")
	}
	if err := PayloadProfile(out).Validate(); err != nil {
		return err
	}
	*p = PayloadProfile(out)
	return nil
}

// Downgrades is the chain a payload of mode over its budget steps down:
// the observation modes before it in DowngradeOrder, the nearest first
// (index and timeline; map is passed over). Only detail downgrades.
func (p PayloadProfile) Downgrades(mode string) []string {
	if mode != PayloadDetail {
		return nil
	}
	i := slices.Index(p.DowngradeOrder, mode)
	if i < 0 {
		i = len(p.DowngradeOrder)
	}
	var out []string
	for j := i - 1; j >= 0; j-- {
		if m := p.DowngradeOrder[j]; m == PayloadIndex || m == PayloadTimeline {
			out = append(out, m)
		}
	}
	return out
}
