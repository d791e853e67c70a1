package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/switchboard/switchboard/web/wire"
)

func TestMarkdownForTheTerminal(t *testing.T) {
	got := markdown("# Plan\n\nDo **this** and `that`:\n\n- read\n- write\n\n1. one\n2. two\n\n" +
		"| step | state |\n|---|---|\n| read | done |\n\n```go\nfunc main() {}\n```\n\nSee [docs](https://example.test/d).\n\n> quoted\n\n\x1b]0;pwned\x07evil")
	for _, want := range []string{"Plan", "Do this and that:", "• read\n• write", "1. one\n2. two",
		"step │ state", "read │ done ", "┌ go\n│ func main() {}", "docs (https://example.test/d)", "▏ quoted"} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered text lacks %q:\n%s", want, got)
		}
	}
	if strings.ContainsRune(got, '\x1b') || strings.ContainsRune(got, '\x07') {
		t.Fatalf("an escape sequence reached the terminal: %q", got)
	}
}

func TestToolLinesUnderAnAnswer(t *testing.T) {
	got := toolLines([]wire.ToolUse{{ID: "1", Name: "write_file", Arg: "notes.md", Status: "ok", MS: 3},
		{ID: "2", Name: "read_file", Arg: "missing.md", Status: "error", Code: "TOOL_NOT_FOUND"}, {ID: "3", Name: "search", Status: "running"}})
	want := "\n⚙ write_file notes.md · ok 3 ms\n⚙ read_file missing.md · error TOOL_NOT_FOUND\n⚙ search · running…"
	if got != want {
		t.Fatalf("tool lines:\n%q\nwant\n%q", got, want)
	}
}

// TestCodeBlockKeepsTabIndentation: a tab in a code block becomes spaces up
// to the next tab stop, so tab-indented code keeps its shape (it was one
// space).
func TestCodeBlockKeepsTabIndentation(t *testing.T) {
	t.Parallel()
	out := ansi.Strip(markdown("```go\nfunc f() {\n\treturn\n\t\tx\n}\n```"))
	for _, want := range []string{"    return", "        x"} {
		if !strings.Contains(out, want) {
			t.Errorf("code block lacks %q:\n%s", want, out)
		}
	}
}
