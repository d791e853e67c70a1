package tools

import (
	"os"
	"path/filepath"
	"testing"
)

const notes = "# Notes\n\nintro\n\n## Plan\n\n- one\n- two\n\n### Risks\n\nrain\n\n## Done\n\nnothing yet\n"

// TestReadAndReplaceBlock: a Markdown section is read and replaced by its
// heading path; the rest of the file is untouched; a missing heading is
// refused listing the headings there are.
func TestReadAndReplaceBlock(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	file := filepath.Join(s.global.Dir(), "notes.md")
	if err := os.WriteFile(file, []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	got := decodeResult[blockResult](t, call(t, reg, "global", "read_block", map[string]any{"path": "notes.md", "heading": "notes / plan"}))
	if got.StartLine != 5 || got.EndLine != 12 || got.Content != "## Plan\n\n- one\n- two\n\n### Risks\n\nrain" {
		t.Fatalf("read_block Plan: %+v", got)
	}
	decodeResult[blockResult](t, call(t, reg, "global", "replace_block", map[string]any{"path": "notes.md", "heading": "Risks", "content": "\nsnow\n"}))
	b, _ := os.ReadFile(file)
	want := "# Notes\n\nintro\n\n## Plan\n\n- one\n- two\n\n### Risks\n\nsnow\n\n## Done\n\nnothing yet\n"
	if string(b) != want {
		t.Fatalf("after replace_block:\n%q\nwant\n%q", b, want)
	}
	wantError(t, call(t, reg, "global", "read_block", map[string]any{"path": "notes.md", "heading": "Budget"}),
		CodeBadArguments, `has no heading "Budget" (headings: "Notes", "Notes/Plan", "Notes/Plan/Risks", "Notes/Done")`)
}
