package web_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// blocksDoc is the notes.md of docs/CONTEXT.md's blocks example.
const blocksDoc = "# Goals\n\nShip it.\n\n## This week\n\nThe pinned-section feature.\n\n## Later\n\nBlocks.\n\n# Log\n\nNothing yet.\n"

// TestWorkspaceBlocksAPI: GET /api/workspace/blocks through the real
// server: a Markdown file's sections as a tree (the doc's example, token
// counts aside), a JSON file split by its top-level keys with line ranges,
// and each block's pin is one PUT /api/context/manifest takes and the
// preview then carries; a missing file is 404, no path 400.
func TestWorkspaceBlocksAPI(t *testing.T) {
	t.Parallel()
	url, _, dir := ctxInstance(t)
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte(blocksDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte("{\n  \"theme\": \"dark\",\n  \"editor\": {\n    \"tabs\": 4\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	get := func(path string) services.FileBlocks {
		t.Helper()
		r, body := do(t, "GET", url+"/api/workspace/blocks?path="+path, testToken, "")
		if r.StatusCode != 200 {
			t.Fatalf("blocks %s: %d %s", path, r.StatusCode, body)
		}
		var fb services.FileBlocks
		decodeStrict(t, []byte(body), &fb)
		return fb
	}
	got := get("notes.md")
	var want services.FileBlocks
	decodeStrict(t, contextDocExample(t, "workspace-blocks"), &want)
	var zero func(bs []services.WorkspaceBlock)
	zero = func(bs []services.WorkspaceBlock) {
		for i := range bs {
			if bs[i].Tokens <= 0 {
				t.Fatalf("block %q has no tokens", bs[i].ID)
			}
			bs[i].Tokens = 0
			zero(bs[i].Children)
		}
	}
	zero(got.Blocks)
	zero(want.Blocks)
	got.Tokens, want.Tokens = 0, 0
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("notes.md's blocks:\n got %s\nwant %s", g, w)
	}

	js := get("settings.json")
	if js.Kind != "json" || len(js.Blocks) != 2 || js.Blocks[0].ID != "$.theme" || js.Blocks[0].Lines != [2]int{2, 2} ||
		js.Blocks[1].ID != "$.editor" || js.Blocks[1].Lines != [2]int{3, 5} {
		t.Fatalf("settings.json's blocks: %+v", js)
	}

	// Each block's pin is what the manifest takes.
	pins, _ := json.Marshal([]services.Pin{got.Blocks[0].Children[0].Pin, js.Blocks[1].Pin})
	r, body := do(t, "PUT", url+"/api/context/manifest", testToken, `{"version":0,"pins":`+string(pins)+`}`)
	if r.StatusCode != 200 {
		t.Fatalf("PUT the blocks' pins: %d %s", r.StatusCode, body)
	}
	retrieved, _ := getPreview(t, url).layer("retrieved")
	if !strings.Contains(retrieved, "The pinned-section feature.") || !strings.Contains(retrieved, `"tabs": 4`) || strings.Contains(retrieved, "Nothing yet.") {
		t.Fatalf("the pinned blocks in the preview: %q", retrieved)
	}

	if r, body := do(t, "GET", url+"/api/workspace/blocks?path=gone.md", testToken, ""); r.StatusCode != 404 {
		t.Fatalf("missing file: %d %s", r.StatusCode, body)
	}
	if r, body := do(t, "GET", url+"/api/workspace/blocks", testToken, ""); r.StatusCode != 400 || !strings.Contains(body, "path") {
		t.Fatalf("no path: %d %s", r.StatusCode, body)
	}
}
