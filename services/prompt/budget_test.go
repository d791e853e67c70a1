package prompt

import (
	"testing"
)

func sumAlloc(a map[Layer]int) int {
	s := 0
	for _, v := range a {
		s += v
	}
	return s
}

func hasCode(ws []Warning, code string) bool {
	for _, w := range ws {
		if w.Code == code {
			return true
		}
	}
	return false
}

func TestAllocateFits(t *testing.T) {
	t.Parallel()
	// Seed 001: budget 6K, layers 5.5K in total: nothing is trimmed.
	needs := map[Layer]int{LayerSystem: 1000, LayerRules: 500, LayerSettings: 300, LayerRetrieved: 1200, LayerHistory: 2000, LayerInput: 400, LayerTodo: 100}
	alloc, warns := Allocate(6000, needs)
	for l, n := range needs {
		if alloc[l] != n {
			t.Errorf("alloc[%s] = %d, want %d", l, alloc[l], n)
		}
	}
	if len(warns) != 0 {
		t.Errorf("warnings = %v", warns)
	}
}

func TestAllocateTrimsRetrievedFirst(t *testing.T) {
	t.Parallel()
	// Seed 001: budget 6K, 7.5K needed, retrieved 2.5K: only retrieved is cut.
	needs := map[Layer]int{LayerSystem: 500, LayerRules: 500, LayerSettings: 500, LayerRetrieved: 2500, LayerHistory: 3000, LayerInput: 400, LayerTodo: 100}
	alloc, _ := Allocate(6000, needs)
	if alloc[LayerRetrieved] != 1000 {
		t.Errorf("retrieved = %d, want 1000", alloc[LayerRetrieved])
	}
	for _, l := range []Layer{LayerSystem, LayerRules, LayerSettings, LayerHistory, LayerInput, LayerTodo} {
		if alloc[l] != needs[l] {
			t.Errorf("alloc[%s] = %d, want untouched %d", l, alloc[l], needs[l])
		}
	}
	if sumAlloc(alloc) != 6000 {
		t.Errorf("sum = %d", sumAlloc(alloc))
	}
}

func TestAllocateMinimumsThenZero(t *testing.T) {
	t.Parallel()
	needs := map[Layer]int{LayerSystem: 1000, LayerRules: 500, LayerSettings: 1000, LayerRetrieved: 5000, LayerHistory: 50000, LayerInput: 1000, LayerTodo: 500}
	alloc, warns := Allocate(6000, needs)
	// 6000 - system 1000 - rules 500 - input 1000 = 3500 for the rest: the
	// first pass cuts retrieved to 0, settings to its floor of 200 and
	// history until it fits (2800); todo, later in the order, is untouched.
	want := map[Layer]int{LayerSystem: 1000, LayerRules: 500, LayerSettings: 200, LayerRetrieved: 0, LayerHistory: 2800, LayerInput: 1000, LayerTodo: 500}
	for l, n := range want {
		if alloc[l] != n {
			t.Errorf("alloc[%s] = %d, want %d", l, alloc[l], n)
		}
	}
	if len(warns) != 0 {
		t.Errorf("warnings = %v", warns)
	}

	// Tighter: the trimmable layers go to zero before rules or input are cut.
	alloc, warns = Allocate(2600, needs)
	want = map[Layer]int{LayerSystem: 1000, LayerRules: 500, LayerSettings: 0, LayerRetrieved: 0, LayerHistory: 0, LayerInput: 1000, LayerTodo: 100}
	for l, n := range want {
		if alloc[l] != n {
			t.Errorf("tight: alloc[%s] = %d, want %d", l, alloc[l], n)
		}
	}
	if !hasCode(warns, CodeRulesOverbudget) { // 500 > 15% of 1600
		t.Errorf("warnings = %v, want %s", warns, CodeRulesOverbudget)
	}
}

func TestAllocateLastResort(t *testing.T) {
	t.Parallel()
	needs := map[Layer]int{LayerSystem: 1000, LayerRules: 3000, LayerInput: 5000, LayerHistory: 4000}
	alloc, warns := Allocate(5000, needs)
	if sumAlloc(alloc) != 5000 {
		t.Fatalf("sum = %d, want 5000", sumAlloc(alloc))
	}
	if alloc[LayerHistory] != 0 || alloc[LayerRules] != 0 || alloc[LayerInput] != 4000 || alloc[LayerSystem] != 1000 {
		t.Errorf("alloc = %v", alloc)
	}
	if !hasCode(warns, CodeRulesOverbudget) || !hasCode(warns, CodeInputTooLarge) {
		t.Errorf("warnings = %v", warns)
	}
	for i, w := range warns {
		for _, o := range warns[i+1:] {
			if o.Code == w.Code {
				t.Errorf("duplicate warning code %s", w.Code)
			}
		}
	}
}

func TestAllocateInputLimit(t *testing.T) {
	t.Parallel()
	_, warns := Allocate(200_000, map[Layer]int{LayerInput: 90_000})
	if !hasCode(warns, CodeInputTooLarge) {
		t.Errorf("warnings = %v, want %s for a 90k input (seed 001)", warns, CodeInputTooLarge)
	}
	if w := warns[0].Err(); w.Kind != "too_large" || w.Code != CodeInputTooLarge {
		t.Errorf("Err() = %#v", w)
	}
}

func TestAllocateFallback(t *testing.T) {
	t.Parallel()
	alloc, warns := Allocate(10_000, map[Layer]int{LayerSystem: 1000, LayerRetrieved: -5, LayerHistory: 500, "bogus": 7})
	if !hasCode(warns, CodeBudgetFallback) {
		t.Fatalf("warnings = %v", warns)
	}
	if alloc[LayerRetrieved] != 9000*25/100 {
		t.Errorf("retrieved fallback = %d, want its default share", alloc[LayerRetrieved])
	}
	if _, ok := alloc["bogus"]; ok {
		t.Errorf("unknown layer allocated")
	}
	alloc, _ = Allocate(-1, map[Layer]int{LayerInput: 10})
	if sumAlloc(alloc) != 0 {
		t.Errorf("negative total allocated %v", alloc)
	}
}

func TestPoliciesAndOrder(t *testing.T) {
	t.Parallel()
	share := 0
	for _, l := range Layers() {
		share += Policy(l).SharePercent
	}
	if share != 100 {
		t.Errorf("shares sum to %d%%", share)
	}
	if len(TrimOrder()) != len(Layers()) {
		t.Errorf("TrimOrder has %d layers", len(TrimOrder()))
	}
	for _, code := range []string{CodeInputTooLarge, CodeBackpressure, CodeScopeViolation, CodeRulesOverbudget, CodeBudgetFallback, CodeBudgetConflict} {
		if CodeKind(code) == "internal" {
			t.Errorf("CodeKind(%s) unmapped", code)
		}
	}
}

func FuzzAllocate(f *testing.F) {
	f.Add(6000, 1000, 500, 300, 1200, 2000, 400, 100)
	f.Add(100, -1, 0, 0, 0, 1<<62, 50, 0)
	f.Fuzz(func(t *testing.T, total, sys, rules, settings, retrieved, history, input, todo int) {
		needs := map[Layer]int{LayerSystem: sys, LayerRules: rules, LayerSettings: settings, LayerRetrieved: retrieved, LayerHistory: history, LayerInput: input, LayerTodo: todo}
		alloc, _ := Allocate(total, needs)
		if s := sumAlloc(alloc); s > max(total, 0) {
			t.Fatalf("sum %d exceeds total %d", s, total)
		}
		for l, n := range needs {
			if alloc[l] < 0 || (n >= 0 && alloc[l] > n) {
				t.Fatalf("alloc[%s] = %d for need %d", l, alloc[l], n)
			}
		}
	})
}
