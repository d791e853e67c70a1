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
