package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services/prompt"
)

// past is what history keeps of a call of tool with args once its turn
// is no longer the newest: the tool's rule applied as the ContextManager
// applies it.
func past(t *testing.T, reg *Registry, tool string, args any) (string, Result) {
	t.Helper()
	raw, _ := json.Marshal(args)
	res := call(t, reg, "global", tool, string(raw))
	tl, _ := reg.Get(tool)
	h := tl.History
	return prompt.HistoryForm(tool, string(raw), res.Content, prompt.CompressionRule{MaxChars: h.MaxChars, KeepFields: h.KeepFields,
		DropFields: h.DropFields, Form: h.Form}), res
}

func wantLines(t *testing.T, form string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(form, w) {
			t.Errorf("history form lacks %q:\n%s", w, form)
		}
	}
}

func TestHistoryFormList(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	for i := range 30 {
		call(t, reg, "global", "write_file", map[string]any{"path": fmt.Sprintf("d/f%02d.txt", i), "content": "x"})
	}
	call(t, reg, "global", "write_file", map[string]any{"path": "d/sub/a.txt", "content": "x"})
	form, res := past(t, reg, "list_files", map[string]any{"path": "d"})
	if len(form) >= len(res.Content) {
		t.Fatalf("the form (%d bytes) is not shorter than the result (%d)", len(form), len(res.Content))
	}
	wantLines(t, form, "[listed d: 31 entries (1 dirs, 30 files among the 31 returned)]", "first 20: ", "d/f00.txt", "(and 11 more)")
	if strings.Contains(form, "mtime") || strings.Count(form, ".txt") != 20 {
		t.Fatalf("the listing keeps more than its first 20 names:\n%s", form)
	}
}

func TestHistoryFormSearch(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	for i := range 3 {
		call(t, reg, "global", "write_file", map[string]any{"path": fmt.Sprintf("s%d.go", i), "content": strings.Repeat("// TODO: fix\ncode\n", 4)})
	}
	form, _ := past(t, reg, "search", map[string]any{"query": "todo"})
	wantLines(t, form, `[searched "todo": 12 matches in 3 files]`, "first 5:\ns0.go:1: // TODO: fix\ns0.go:3: // TODO: fix", "(and 7 more)")
	if strings.Count(form, "TODO") != 5 {
		t.Fatalf("the search keeps more than 5 matches:\n%s", form)
	}
}

func TestHistoryFormRead(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	var b strings.Builder
	for i := 1; i <= 700; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	call(t, reg, "global", "write_file", map[string]any{"path": "big.txt", "content": b.String()})
	form, _ := past(t, reg, "read_file", map[string]any{"path": "big.txt", "offset_line": 11, "max_lines": 20})
	wantLines(t, form, "[read big.txt, lines 11-30]\n    11\tline 11\n", "    30\tline 30")
	if strings.Contains(form, "not kept") {
		t.Fatalf("a short range lost lines:\n%s", form)
	}
	// A long range keeps its first 500 lines, numbered, and names the rest.
	form, _ = past(t, reg, "read_file", map[string]any{"path": "big.txt"})
	wantLines(t, form, "[read big.txt, lines 1-700]", "   500\tline 500", "[lines 501-700 not kept in history; read them again if needed]")
	if strings.Contains(form, "line 501") {
		t.Fatalf("more than 500 lines kept")
	}
	// Numbered by the call already: not numbered twice.
	form, _ = past(t, reg, "read_file", map[string]any{"path": "big.txt", "max_lines": 2, "line_numbers": true})
	wantLines(t, form, "\n     1\tline 1\n     2\tline 2")
	// An error keeps its code and message (the field rules).
	form, _ = past(t, reg, "read_file", map[string]any{"path": "missing.txt"})
	wantLines(t, form, `"error":{"code":`)
}

func TestHistoryFormEdit(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	call(t, reg, "global", "write_file", map[string]any{"path": "main.go", "content": "package main\n\nfunc main() {\n}\n"})
	newText := "func main() {\n\tfmt.Println(\"hi\")\n" + strings.Repeat("\t// more\n", 10) + "}"
	form, _ := past(t, reg, "edit_file", map[string]any{"path": "main.go", "old_text": "func main() {\n}", "new_text": newText})
	wantLines(t, form, "[edited main.go: 1 replacement(s), lines 3-15 now]\nfunc main() {\n\tfmt.Println(\"hi\")", "[5 more lines of the new text not kept]")
}

func TestHistoryFormWrite(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	var b strings.Builder
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&b, "row %d\n", i)
	}
	form, _ := past(t, reg, "write_file", map[string]any{"path": "notes.md", "content": b.String()})
	wantLines(t, form, "[created (new file) notes.md: ", " 80 lines;", "first 30 lines:\nrow 1\n", "row 30\n[50 more lines not kept in history]")
	form, _ = past(t, reg, "write_file", map[string]any{"path": "notes.md", "content": "short\n"})
	wantLines(t, form, "[overwrote notes.md: 6 bytes written, 1 lines; the file is 6 bytes]\nfirst 1 lines:\nshort")
	form, _ = past(t, reg, "write_file", map[string]any{"path": "notes.md", "content": "more\n", "append": true})
	wantLines(t, form, "[appended to notes.md: ")
}

func TestTodoToolAndItsHistoryForm(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	if err := reg.Register(Todo(s.wss.For)); err != nil {
		t.Fatal(err)
	}
	form, res := past(t, reg, "todo", map[string]any{"items": []map[string]any{{"text": "read the plan", "done": true}, {"text": "write the summary"}}})
	if form != "[task list set: 2 items, 1 done; the current list is the todo recap at the end of the prompt]" || res.IsError {
		t.Fatalf("todo's history form: %q (%s)", form, res.Content)
	}
	data, err := s.wss.ReadFile("global", ".todo/main.md")
	if err != nil || string(data) != "- [x] read the plan\n- [ ] write the summary\n" {
		t.Fatalf("the stored list: %q %v", data, err)
	}
	// Each scope has its own list.
	call(t, reg, "global/sub:coder:7", "todo", `{"items":[{"text":"step"}]}`)
	if data, err := s.wss.ReadFile("global", ".todo/sub_coder_7.md"); err != nil || string(data) != "- [ ] step\n" {
		t.Fatalf("the sub-agent's list: %q %v", data, err)
	}
	wantError(t, call(t, reg, "global", "todo", `{"items":[{"text":"two\nlines"}]}`), CodeBadArguments, "more than one line")
}
