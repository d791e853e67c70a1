package tools

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEditFile: one exact occurrence is replaced in place; absent or
// ambiguous text is refused naming the problem (and the lines); the rules
// files stay refused; the edited file reads back changed.
func TestEditFile(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	root := s.global.Dir()
	if err := os.WriteFile(filepath.Join(root, "plan.md"), []byte("# Plan\n\n- step one\n- step two\n- step two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := decodeResult[editFileResult](t, call(t, reg, "global", "edit_file", map[string]any{"path": "plan.md", "old_text": "step one", "new_text": "step 1"}))
	if res.Replacements != 1 || res.FirstLine != 3 {
		t.Fatalf("edit: %+v", res)
	}
	wantError(t, call(t, reg, "global", "edit_file", map[string]any{"path": "plan.md", "old_text": "step two", "new_text": "step 2"}),
		CodeBadArguments, "occurs 2 times in \"plan.md\" (lines 4, 5)")
	wantError(t, call(t, reg, "global", "edit_file", map[string]any{"path": "plan.md", "old_text": "step three", "new_text": "x"}),
		CodeBadArguments, "does not occur")
	wantError(t, call(t, reg, "global", "edit_file", map[string]any{"path": "plan.md", "old_text": "", "new_text": "x"}),
		CodeBadArguments, "\"old_text\" is empty")
	all := decodeResult[editFileResult](t, call(t, reg, "global", "edit_file", map[string]any{"path": "plan.md", "old_text": "step two", "new_text": "step 2", "replace_all": true}))
	if all.Replacements != 2 {
		t.Fatalf("replace_all: %+v", all)
	}
	got, _ := os.ReadFile(filepath.Join(root, "plan.md"))
	if string(got) != "# Plan\n\n- step 1\n- step 2\n- step 2\n" {
		t.Fatalf("file after the edits: %q", got)
	}
	if r := call(t, reg, "global", "edit_file", map[string]any{"path": "missing.md", "old_text": "a", "new_text": "b"}); !r.IsError || r.ErrorCode != "TOOL_NOT_FOUND" {
		t.Fatalf("missing file: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(root, "RULES.md"), []byte("be kind"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := call(t, reg, "global", "edit_file", map[string]any{"path": "RULES.md", "old_text": "kind", "new_text": "evil"}); !r.IsError {
		t.Fatal("edit_file changed RULES.md")
	}
	if b, _ := os.ReadFile(filepath.Join(root, "RULES.md")); string(b) != "be kind" {
		t.Fatalf("RULES.md is now %q", b)
	}
	if r := call(t, reg, "global", "edit_file", map[string]any{"path": "../outside.md", "old_text": "a", "new_text": "b"}); !r.IsError || r.ErrorCode != CodePathRefused {
		t.Fatalf("path outside the workspace: %+v", r)
	}
}
