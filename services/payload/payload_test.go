package payload_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services/payload"
)

// TestPayloadDocExampleDecodes: docs/CONTEXT.md's payload example is the
// contract's shape (unknown fields refused) and within its budget.
func TestPayloadDocExampleDecodes(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CONTEXT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- example: context-payload -->\n```json\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/CONTEXT.md has no closed context-payload example")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(block)))
	dec.DisallowUnknownFields()
	var p payload.Payload
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("payload example: %v", err)
	}
	if p.Version != payload.Version || p.Mode != payload.ModeDetail || len(p.Observations.Items) != 2 ||
		p.Observations.Items[0].SchemaVersion != payload.ObsVersion || p.Budget.TokensApprox > p.Budget.BudgetTokens ||
		p.Budget.DowngradeApplied[0] != "detail→timeline" || p.Task.TaskID != "r12" {
		t.Fatalf("payload example: %+v", p)
	}
	if n := payload.Approx(block); n > p.Budget.BudgetTokens {
		t.Fatalf("the example is %d tokens, over its budget", n)
	}
}

// TestPayloadProfileDocExample: docs/CONTEXT.md's budget profile example
// is a valid profile whose values and downgrade order are read as named.
func TestPayloadProfileDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CONTEXT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- example: payload-profile -->\n```json\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/CONTEXT.md has no closed payload-profile example")
	}
	var profiles map[string]struct {
		System  string          `json:"system"`
		Tools   []string        `json:"tools"`
		Context payload.Profile `json:"context"`
	}
	dec := json.NewDecoder(strings.NewReader(block))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&profiles); err != nil {
		t.Fatal(err)
	}
	p := profiles["researcher"].Context
	if p.Budgets.Index != 800 || p.Budgets.Detail != 4000 || p.MaxPerSource.Observations != 1000 || p.TopK.Index != 10 ||
		strings.Join(p.Downgrades(payload.ModeDetail), ",") != payload.ModeIndex {
		t.Fatalf("the example profile: %+v", p)
	}
}
