package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/switchboard/switchboard/services/prompt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func setupTools(t testing.TB) (*Registry, *sandbox) {
	t.Helper()
	s := newSandbox(t)
	reg := NewRegistry(nil)
	if err := RegisterWorkspaceTools(reg, s.wss.For); err != nil {
		t.Fatal(err)
	}
	return reg, s
}

// call runs a tool in timeline scope "global", context scope "main" unless
// the scope is given as "timeline/context".
func call(t testing.TB, reg *Registry, scope, tool string, args any) Result {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	timeline, contextScope, found := strings.Cut(scope, "/")
	if !found {
		contextScope = "main"
	}
	return reg.Execute(context.Background(), tool, Call{
		TimelineScope: timeline, ContextScope: contextScope, RunID: 1, Arguments: json.RawMessage(raw),
	})
}

func decodeResult[T any](t testing.TB, res Result) T {
	t.Helper()
	var v T
	if res.IsError {
		t.Fatalf("unexpected error result: %s", res.Content)
	}
	if err := json.Unmarshal([]byte(res.Content), &v); err != nil {
		t.Fatalf("result is not JSON: %q: %v", res.Content, err)
	}
	return v
}

func wantError(t testing.TB, res Result, code, msgPart string) {
	t.Helper()
	if !res.IsError || res.ErrorCode != code {
		t.Fatalf("got %+v, want error %s", res, code)
	}
	if msg := errorMessage(t, res); !strings.Contains(msg, msgPart) {
		t.Fatalf("message %q does not contain %q", msg, msgPart)
	}
}

func TestWriteThenReadFile(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	w := decodeResult[writeFileResult](t, call(t, reg, "global", "write_file",
		map[string]any{"path": "notes/todo.md", "content": "one\ntwo\nthree\n"}))
	if !w.Created || w.BytesWritten != 14 || w.Size != 14 || w.Mtime == "" || w.Path != "notes/todo.md" {
		t.Fatalf("write result %+v", w)
	}
	r := decodeResult[readFileResult](t, call(t, reg, "global", "read_file", map[string]any{"path": "notes/todo.md"}))
	if r.Content != "one\ntwo\nthree\n" || r.Size != 14 || r.Mtime != w.Mtime || r.StartLine != 1 || r.EndLine != 3 || r.Truncated {
		t.Fatalf("read result %+v", r)
	}
	r = decodeResult[readFileResult](t, call(t, reg, "global", "read_file",
		map[string]any{"path": "notes/todo.md", "offset_line": 2, "max_lines": 1, "line_numbers": true}))
	if r.Content != "     2\ttwo\n" || r.StartLine != 2 || r.EndLine != 2 || !r.Truncated || !strings.Contains(r.Note, "offset_line=3") {
		t.Fatalf("paged read %+v", r)
	}
	r = decodeResult[readFileResult](t, call(t, reg, "global", "read_file",
		map[string]any{"path": "notes/todo.md", "offset_line": 9}))
	if r.Content != "" || !strings.Contains(r.Note, "past the end") {
		t.Fatalf("read past the end %+v", r)
	}
	w = decodeResult[writeFileResult](t, call(t, reg, "global", "write_file",
		map[string]any{"path": "notes/todo.md", "content": "four", "append": true}))
	if w.Created || !w.Appended || w.Size != 18 {
		t.Fatalf("append result %+v", w)
	}
	wantError(t, call(t, reg, "global", "read_file", map[string]any{"path": "missing.txt"}), "TOOL_NOT_FOUND", `"missing.txt" does not exist`)
	wantError(t, call(t, reg, "global", "read_file", map[string]any{"path": "notes"}), "TOOL_INVALID", "is a directory")
}

func TestReadFileChangedSinceLastRead(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	call(t, reg, "global", "write_file", map[string]any{"path": "f.txt", "content": "v1"})
	read := func(scope string) readFileResult {
		return decodeResult[readFileResult](t, call(t, reg, scope, "read_file", map[string]any{"path": "f.txt"}))
	}
	if r := read("global"); r.ChangedSinceLastRead {
		t.Fatal("first read after own write reported a change")
	}
	if r := read("global/sub:coder:7"); r.ChangedSinceLastRead {
		t.Fatal("first read by another scope reported a change")
	}
	// Someone else (the sub-agent) rewrites the file.
	call(t, reg, "global/sub:coder:7", "write_file", map[string]any{"path": "f.txt", "content": "version 2"})
	r := read("global")
	if !r.ChangedSinceLastRead || !strings.Contains(r.Note, "changed") {
		t.Fatalf("change not reported: %+v", r)
	}
	if r := read("global"); r.ChangedSinceLastRead {
		t.Fatal("change reported twice")
	}
	// An edit on disk with the same size but a new mtime.
	p := filepath.Join(s.global.Dir(), "f.txt")
	if err := os.WriteFile(p, []byte("version 3"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r := read("global"); !r.ChangedSinceLastRead || r.Content != "version 3" {
		t.Fatalf("on-disk change not reported: %+v", r)
	}
	// Appending to a version it never saw does not make it "seen".
	call(t, reg, "global/sub:coder:7", "write_file", map[string]any{"path": "f.txt", "content": "!", "append": true})
	if r := read("global/sub:coder:7"); !r.ChangedSinceLastRead {
		t.Fatal("append over an unseen version hid the change")
	}
}

func TestReadFileCapsLargeFiles(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	line := strings.Repeat("x", 99) + "\n"
	content := strings.Repeat(line, 3000) // 300,000 bytes
	if err := os.WriteFile(filepath.Join(s.global.Dir(), "big.txt"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	r := decodeResult[readFileResult](t, call(t, reg, "global", "read_file", map[string]any{"path": "big.txt"}))
	if !r.Truncated || len(r.Content) != MaxReadBytes || !strings.Contains(r.Note, "capped") {
		t.Fatalf("truncation: len=%d truncated=%v note=%q", len(r.Content), r.Truncated, r.Note)
	}
	next := MaxReadBytes/len(line) + 1
	if !strings.Contains(r.Note, fmt.Sprintf("offset_line=%d", next)) {
		t.Fatalf("note %q does not say offset_line=%d", r.Note, next)
	}
	r = decodeResult[readFileResult](t, call(t, reg, "global", "read_file", map[string]any{"path": "big.txt", "offset_line": next}))
	if r.Truncated || r.EndLine != 3000 {
		t.Fatalf("second page: %+v", r.EndLine)
	}

	if err := os.WriteFile(filepath.Join(s.global.Dir(), "bin"), []byte("ab\x00cd"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantError(t, call(t, reg, "global", "read_file", map[string]any{"path": "bin"}), "TOOL_INVALID", "binary")
}

func TestWriteFileLimitsAndBadArguments(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	big := strings.Repeat("x", MaxWriteBytes+1)
	wantError(t, call(t, reg, "global", "write_file", map[string]any{"path": "big", "content": big}), "TOOL_TOO_LARGE", "at most 1048576 bytes")
	wantError(t, call(t, reg, "global", "write_file", map[string]any{"path": "x"}), CodeBadArguments, `missing required argument "content"`)
	wantError(t, call(t, reg, "global", "write_file", map[string]any{"path": 7, "content": ""}), CodeBadArguments, `argument "path": expected string`)
	wantError(t, call(t, reg, "global", "read_file", `{"path": "x"`), CodeBadArguments, "not valid JSON")
	wantError(t, call(t, reg, "global", "read_file", map[string]any{"path": "x", "max_lines": "ten"}), CodeBadArguments, `argument "max_lines"`)
	wantError(t, call(t, reg, "global", "read_file", map[string]any{"path": "x", "offset_line": -1}), CodeBadArguments, `"offset_line" must be at least 1`)
	wantError(t, call(t, reg, "global", "read_file", map[string]any{"file": "x"}), CodeBadArguments, `unknown argument "file"`)
	wantError(t, call(t, reg, "global", "search", map[string]any{"query": " "}), CodeBadArguments, `"query" is empty`)
	wantError(t, call(t, reg, "global", "search", map[string]any{"query": "x", "max_results": 1000}), CodeBadArguments, `"max_results"`)
}

func TestToolsRefuseEscapes(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	for _, p := range []string{"../x", "/etc/passwd", "a/../../b", "a\x00b", "etc/passwd", "passwd", "sibling/private.txt",
		"sibling_file", "outdir", "outdir/canary.txt", "canary", "dangling", "relative_out", "../tg%3A123/private.txt"} {
		for _, tool := range []string{"read_file", "write_file", "list_files", "search"} {
			args := map[string]any{"path": p}
			switch tool {
			case "write_file":
				args["content"] = "pwned"
			case "search":
				args["query"] = "secret"
			}
			res := call(t, reg, "global", tool, args)
			if !res.IsError || res.ErrorCode != CodePathRefused {
				t.Errorf("%s(%q) = %+v, want %s", tool, p, res, CodePathRefused)
			}
		}
	}
	s.assertOutsideUntouched(t)
}

func TestTimelinesAreIsolated(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	call(t, reg, "global", "write_file", map[string]any{"path": "mine.txt", "content": "global secret"})
	wantError(t, call(t, reg, "tg:123", "read_file", map[string]any{"path": "mine.txt"}), "TOOL_NOT_FOUND", "does not exist")
	r := decodeResult[searchResult](t, call(t, reg, "tg:123", "search", map[string]any{"query": "global secret"}))
	if len(r.Matches) != 0 {
		t.Fatalf("tg:123 found global's file: %+v", r)
	}
	r = decodeResult[searchResult](t, call(t, reg, "global", "search", map[string]any{"query": "tg secret"}))
	if len(r.Matches) != 0 {
		t.Fatalf("global found tg:123's file: %+v", r)
	}
	l := decodeResult[listFilesResult](t, call(t, reg, "tg:123", "list_files", map[string]any{"recursive": true}))
	if len(l.Entries) != 1 || l.Entries[0].Path != "private.txt" {
		t.Fatalf("tg:123 lists %+v", l.Entries)
	}
}

func TestListFiles(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	call(t, reg, "global", "write_file", map[string]any{"path": "docs/sub/deep.txt", "content": "12345"})
	l := decodeResult[listFilesResult](t, call(t, reg, "global", "list_files", map[string]any{"path": "docs"}))
	got := map[string]fileEntry{}
	for _, e := range l.Entries {
		got[e.Path] = e
	}
	if len(got) != 2 || got["docs/inside.txt"].Type != "file" || got["docs/inside.txt"].Size != 6 || got["docs/sub"].Type != "dir" {
		t.Fatalf("list docs: %+v", l.Entries)
	}
	l = decodeResult[listFilesResult](t, call(t, reg, "global", "list_files", map[string]any{"recursive": true}))
	got = map[string]fileEntry{}
	for _, e := range l.Entries {
		got[e.Path] = e
	}
	if got["docs/sub/deep.txt"].Size != 5 || got["etc"].Type != "symlink" || got["outdir"].Type != "symlink" {
		t.Fatalf("recursive list: %+v", l.Entries)
	}
	for p := range got {
		if strings.HasPrefix(p, "etc/") || strings.HasPrefix(p, "outdir/") || strings.HasPrefix(p, "sibling/") {
			t.Fatalf("list followed a symlink out: %s", p)
		}
	}
	if strings.Contains(l.Path+fmt.Sprint(l.Entries), s.outside) {
		t.Fatal("host path leaked")
	}
	// A symlinked directory inside the workspace is listed under the name used.
	l = decodeResult[listFilesResult](t, call(t, reg, "global", "list_files", map[string]any{"path": "docs_link"}))
	if len(l.Entries) != 2 || l.Entries[0].Path != "docs_link/inside.txt" {
		t.Fatalf("list via link: %+v", l.Entries)
	}

	for i := range maxListEntries + 20 {
		if err := os.WriteFile(filepath.Join(s.global.Dir(), fmt.Sprintf("many/f%04d", i)), nil, 0o600); err != nil {
			if os.IsNotExist(err) {
				_ = os.Mkdir(filepath.Join(s.global.Dir(), "many"), 0o700)
				err = os.WriteFile(filepath.Join(s.global.Dir(), fmt.Sprintf("many/f%04d", i)), nil, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	l = decodeResult[listFilesResult](t, call(t, reg, "global", "list_files", map[string]any{"path": "many"}))
	if len(l.Entries) != maxListEntries || l.Total != maxListEntries+20 || !l.Truncated || !strings.Contains(l.Note, "and 20 more") {
		t.Fatalf("cap: %d entries, total %d, note %q", len(l.Entries), l.Total, l.Note)
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	g := s.global.Dir()
	call(t, reg, "global", "write_file", map[string]any{"path": "src/a.go", "content": "package a\n\n  // TODO: Fix the Widget\nfunc x() {}\n"})
	call(t, reg, "global", "write_file", map[string]any{"path": "src/b.txt", "content": "widget " + strings.Repeat("y", 300) + "\nnone\nWIDGET\n"})
	if err := os.WriteFile(filepath.Join(g, "bin.dat"), []byte("widget\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g, "huge.txt"), []byte(strings.Repeat("widget\n", MaxSearchFileBytes/7+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := decodeResult[searchResult](t, call(t, reg, "global", "search", map[string]any{"query": "wIdGeT"}))
	want := []searchMatch{
		{File: "src/a.go", Line: 3, Text: "// TODO: Fix the Widget"},
		{File: "src/b.txt", Line: 1},
		{File: "src/b.txt", Line: 3, Text: "WIDGET"},
	}
	if len(r.Matches) != len(want) {
		t.Fatalf("matches %+v", r.Matches)
	}
	for i, m := range r.Matches {
		if m.File != want[i].File || m.Line != want[i].Line || (want[i].Text != "" && m.Text != want[i].Text) {
			t.Errorf("match %d = %+v, want %+v", i, m, want[i])
		}
	}
	if n := len([]rune(r.Matches[1].Text)); n != maxSearchLineText+1 { // 200 + "…"
		t.Errorf("long line kept %d runes", n)
	}
	if r.FilesSkipped != 2 || r.Truncated {
		t.Errorf("skipped %d truncated %v", r.FilesSkipped, r.Truncated)
	}
	r = decodeResult[searchResult](t, call(t, reg, "global", "search", map[string]any{"query": "widget", "path": "src", "max_results": 2}))
	if len(r.Matches) != 2 || !r.Truncated || !strings.Contains(r.Note, "stopped after 2") {
		t.Fatalf("capped search %+v", r)
	}
	r = decodeResult[searchResult](t, call(t, reg, "global", "search", map[string]any{"query": "inside", "path": "docs_link"}))
	if len(r.Matches) != 1 || r.Matches[0].File != "docs_link/inside.txt" {
		t.Fatalf("search via link %+v", r.Matches)
	}
	// History keeps the first hits only.
	rule, _ := reg.Get("search")
	res := call(t, reg, "global", "search", map[string]any{"query": "x", "max_results": 200})
	if h := historyForm(rule, res); len(h) > 2*rule.History.MaxChars+prompt.CompressSlack {
		t.Fatalf("history form is %d chars", len(h))
	}
}

func TestReadFileHistoryRule(t *testing.T) {
	t.Parallel()
	reg, _ := setupTools(t)
	call(t, reg, "global", "write_file", map[string]any{"path": "long.txt", "content": strings.Repeat("abcdefghij", 500)})
	res := call(t, reg, "global", "read_file", map[string]any{"path": "long.txt"})
	tool, _ := reg.Get("read_file")
	var h map[string]any
	if err := json.Unmarshal([]byte(historyForm(tool, res)), &h); err != nil {
		t.Fatal(err)
	}
	if h["path"] != "long.txt" || h["mtime"] == nil || len(h["content"].(string)) > 1100 {
		t.Fatalf("history form %v", h)
	}
}

// historyForm is how a tool's field rules keep a result in history (what
// the ContextManager falls back to when no history form reads it).
func historyForm(tool Tool, res Result) string {
	return prompt.Compress(tool.Name, res.Content, prompt.CompressionRule{
		MaxChars: tool.History.MaxChars, KeepFields: tool.History.KeepFields, DropFields: tool.History.DropFields})
}

func TestToolsConcurrentUse(t *testing.T) {
	t.Parallel()
	reg, s := setupTools(t)
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			scope := fmt.Sprintf("global/run:%d", i%3)
			for j := range 20 {
				call(t, reg, scope, "write_file", map[string]any{"path": "shared.txt", "content": strings.Repeat("x", j)})
				call(t, reg, scope, "read_file", map[string]any{"path": "shared.txt"})
				call(t, reg, scope, "search", map[string]any{"query": "x"})
			}
		}()
	}
	for range 8 {
		<-done
	}
	entries, err := os.ReadDir(s.global.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpFilePrefix) {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}
