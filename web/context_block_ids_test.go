package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestPinByBlockIDSurvivesARename: through the real server, a section
// pinned by its block id (block_id of GET /api/workspace/blocks) is still
// the one the next model request carries after the owner renames its
// heading and adds a section before it; the renamed section keeps its id,
// a new section gets a new one, and a removed section's id is not given
// again; a pin of a removed section is skipped and named.
func TestPinByBlockIDSurvivesARename(t *testing.T) {
	t.Parallel()
	url, model, dir := ctxInstance(t)
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() map[string]string {
		t.Helper()
		r, body := do(t, "GET", url+"/api/workspace/blocks?path=notes.md", testToken, "")
		if r.StatusCode != 200 {
			t.Fatalf("blocks: %d %s", r.StatusCode, body)
		}
		var fb services.FileBlocks
		decodeStrict(t, []byte(body), &fb)
		out := map[string]string{}
		var walk func([]services.WorkspaceBlock)
		walk = func(bs []services.WorkspaceBlock) {
			for _, b := range bs {
				out[b.ID] = b.BlockID
				walk(b.Children)
			}
		}
		walk(fb.Blocks)
		return out
	}
	write(blocksDoc)
	before := ids()
	week := before["Goals/This week"]
	if week != "b2" || before["Goals"] != "b1" || before["Log"] != "b4" {
		t.Fatalf("first ids: %v", before)
	}
	r, body := do(t, "PUT", url+"/api/context/manifest", testToken, `{"version":0,"pins":[{"path":"notes.md","id":"`+week+`"}]}`)
	if r.StatusCode != 200 {
		t.Fatalf("PUT a pin by id: %d %s", r.StatusCode, body)
	}

	// The owner renames the heading, edits a word of the section and adds
	// a section before it, and removes Later.
	write("# Goals\n\nShip it.\n\n## Urgent\n\nCall the bank.\n\n## Due by Friday\n\nThe pinned-section feature, soon.\n\n# Log\n\nNothing yet.\n")
	m := post(t, url, "what is due this week?")
	waitAnswer(t, url, m.ID)
	reqs := model.Requests()
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "The pinned-section feature, soon.") || strings.Contains(last, "Call the bank.") {
		t.Fatalf("the model request after the rename lacks the pinned section (or has another): %s", last)
	}
	after := ids()
	if after["Goals/Due by Friday"] != week || after["Goals"] != "b1" || after["Log"] != "b4" || after["Goals/Urgent"] != "b5" {
		t.Fatalf("ids after the rename: %v (before %v)", after, before)
	}

	// The section goes: the pin is skipped and named; its id is not reused.
	write("# Goals\n\nShip it.\n\n# Log\n\nNothing yet.\n\n## New\n\nA fresh section with other words.\n")
	p := getPreview(t, url)
	named := false
	for _, w := range p.Warnings {
		named = named || w.Code == "CONTEXT_PIN_MISSING" && strings.Contains(w.Message, "notes.md#@"+week)
	}
	if !named {
		t.Fatalf("the removed section's pin is not named: %+v", p.Warnings)
	}
	if got := ids(); got["Log/New"] != "b6" {
		t.Fatalf("ids after the removal: %v", got)
	}
}
