package services_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestPayloadProfile: a profile read from JSON keeps the defaults it does
// not name, refuses values out of bounds naming the field, and its
// downgrade order decides detail's downgrade chain.
func TestPayloadProfile(t *testing.T) {
	var p services.PayloadProfile
	if err := json.Unmarshal([]byte(`{"budgets":{"detail_tokens":900},"downgrade_order":["index","detail"]}`), &p); err != nil {
		t.Fatal(err)
	}
	def := services.DefaultPayloadProfile()
	if p.Budgets.Detail != 900 || p.Budgets.Index != def.Budgets.Index || p.TopK != def.TopK || p.MaxPerSource != def.MaxPerSource {
		t.Fatalf("partial profile: %+v", p)
	}
	for order, want := range map[string][]string{
		`["index","map","timeline","detail"]`: {"timeline", "index"},
		`["index","detail"]`:                  {"index"},
		`["timeline","index","detail"]`:       {"index", "timeline"},
		`["detail","index"]`:                  nil,
	} {
		var q services.PayloadProfile
		if err := json.Unmarshal([]byte(`{"downgrade_order":`+order+`}`), &q); err != nil {
			t.Fatal(err)
		}
		if got := q.Downgrades(services.PayloadDetail); !slices.Equal(got, want) {
			t.Errorf("order %s: detail downgrades %v, want %v", order, got, want)
		}
		if got := q.Downgrades(services.PayloadTimeline); got != nil {
			t.Errorf("order %s: timeline downgrades %v", order, got)
		}
	}
	for in, want := range map[string]string{
		`{"budgets":{"index_tokens":50}}`:            "budgets.index_tokens 50: want 100 to 1000000",
		`{"max_per_source_tokens":{"repo_map":0}}`:   "max_per_source_tokens.repo_map 0: want 1 to 1000000",
		`{"top_k":{"detail":5000}}`:                  "top_k.detail 5000: want 1 to 1000",
		`{"downgrade_order":[]}`:                     "downgrade_order is empty",
		`{"downgrade_order":["index","index"]}`:      `downgrade_order[1] "index" is listed twice`,
		`{"downgrade_order":["index","everything"]}`: `downgrade_order[1] "everything": want one of index, map, timeline, detail`,
		`{"top_k":{"indx":5}}`:                       `unknown field "indx"`,
	} {
		var q services.PayloadProfile
		err := json.Unmarshal([]byte(in), &q)
		if err == nil || !services.IsKind(err, services.EINVALID) || !strings.Contains(services.ErrorMessage(err), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}
