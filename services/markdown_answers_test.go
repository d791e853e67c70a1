package services_test

import (
	"strings"
	"testing"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/markdown"
)

// topBlocks lists the kinds of src's top-level Markdown blocks (as every
// channel parses it), each with its text's first line.
func topBlocks(src string) []string {
	d := markdown.Parse(src)
	var out []string
	for n := d.Root.FirstChild(); n != nil; n = n.NextSibling() {
		first := ""
		if lines := n.Lines(); lines != nil && lines.Len() > 0 {
			seg := lines.At(0)
			first = strings.TrimSpace(string(seg.Value(d.Source)))
		}
		out = append(out, n.Kind().String()+": "+first)
	}
	return out
}

// The service's own answers read as they are meant on every channel:
// /policy's table is a table and its overrides a list after it, and
// /budget's "Last 7 days" heading is not swallowed by the list above it.
func TestServiceAnswersParseAsTheirShape(t *testing.T) {
	p, err := services.ParsePolicy(`{"tools":{"web_search":{"tainted":"deny"}},"servers":{"gh":{"*":"ask"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	blocks := topBlocks("Policy in force:\n\n" + p.String())
	if len(blocks) != 3 || !strings.HasPrefix(blocks[1], east.KindTable.String()) || !strings.HasPrefix(blocks[2], ast.KindList.String()) {
		t.Fatalf("/policy parses as %q; want a paragraph, a table, a list", blocks)
	}
	r := services.BudgetReport{Today: "2026-11-26", Zone: "UTC",
		Kinds: []services.BudgetKindToday{{Kind: services.BudgetMain, Spent: 949}, {Kind: services.BudgetSubagent}},
		Days:  []services.BudgetDay{{Day: "2026-11-26", Kind: services.BudgetMain, Spent: 949}}}
	blocks = topBlocks(r.Text())
	want := []string{"Paragraph", "List", "Paragraph: Last 7 days", "List"}
	if len(blocks) != len(want) {
		t.Fatalf("/budget parses as %q; want %q", blocks, want)
	}
	for i := range want {
		if !strings.HasPrefix(blocks[i], want[i]) {
			t.Fatalf("/budget parses as %q; want %q", blocks, want)
		}
	}
}
