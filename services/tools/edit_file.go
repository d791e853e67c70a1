package tools

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services"
)

// maxEditBytes bounds the file edit_file changes (it reads it whole).
const maxEditBytes = 1 << 20

type editFileArgs struct {
	Path       string `json:"path" jsonschema:"File path relative to the workspace root."`
	OldText    string `json:"old_text" jsonschema:"The exact text to replace, with enough surrounding text to be unique."`
	NewText    string `json:"new_text" jsonschema:"The text to put in its place (may be empty, to delete)."`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"Replace every occurrence instead of requiring exactly one. Default false."`
}

type editFileResult struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	FirstLine    int    `json:"first_line"`
	Size         int64  `json:"size"`
	Mtime        string `json:"mtime"`
}

// editFile replaces exact text in a file: one occurrence (or every one with
// replace_all), failing clearly when the text is absent or ambiguous, and
// writing through the same checks and bounds as write_file.
func (t workspaceTools) editFile(ctx context.Context, call Call, a editFileArgs) (Result, error) {
	if a.OldText == "" {
		return Result{}, badArgument("argument \"old_text\" is empty; to write a whole file use write_file")
	}
	if a.OldText == a.NewText {
		return Result{}, badArgument("\"old_text\" and \"new_text\" are the same; nothing to change")
	}
	w, err := t.workspace(call)
	if err != nil {
		return Result{}, err
	}
	rel, err := w.resolveWrite(a.Path)
	if err != nil {
		return Result{}, err
	}
	text, info, err := readText(w, a.Path, rel)
	if err != nil {
		return Result{}, err
	}
	n := strings.Count(text, a.OldText)
	switch {
	case n == 0:
		return Result{}, services.CodedErrorf(services.EINVALID, CodeBadArguments,
			"\"old_text\" does not occur in %q (spaces, tabs and line ends must match exactly; read_file shows the current text)", a.Path)
	case n > 1 && !a.ReplaceAll:
		return Result{}, services.CodedErrorf(services.EINVALID, CodeBadArguments,
			"\"old_text\" occurs %d times in %q (lines %s); give more surrounding text to pick one, or replace_all=true", n, a.Path, lines(text, a.OldText, 5))
	}
	first := strings.Count(text[:strings.Index(text, a.OldText)], "\n") + 1
	if !a.ReplaceAll {
		n = 1
	}
	out := strings.Replace(text, a.OldText, a.NewText, n)
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	_, after, err := w.writeFile(a.Path, rel, []byte(out), false, call.RunID)
	if err != nil {
		return Result{}, err
	}
	w.noteWrite(call.ContextScope, rel, info, after, false)
	if err := w.noteRecapWrite(call, rel, false); err != nil {
		return Result{}, err
	}
	return JSONResult(editFileResult{Path: shownPath(a.Path), Replacements: n, FirstLine: first, Size: after.Size(), Mtime: formatTime(after.ModTime())})
}

// lines lists the line numbers of the first max occurrences of s in text.
func lines(text, s string, max int) string {
	var out []string
	off := 0
	for len(out) < max {
		i := strings.Index(text[off:], s)
		if i < 0 {
			break
		}
		out = append(out, fmt.Sprint(strings.Count(text[:off+i], "\n")+1))
		off += i + len(s)
	}
	return strings.Join(out, ", ")
}

// readText reads a whole text file for an edit: at most maxEditBytes, UTF-8
// without NUL.
func readText(w *Workspace, name, rel string) (string, fs.FileInfo, error) {
	f, info, err := w.open(name, rel)
	if err != nil {
		return "", nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEditBytes+1))
	f.Close()
	if err != nil {
		return "", nil, fsError("read", name, err)
	}
	if len(data) > maxEditBytes {
		return "", nil, services.Errorf(services.ETOOLARGE, "%q is over %d bytes; it can be changed only with write_file", name, maxEditBytes)
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return "", nil, services.Errorf(services.EINVALID, "%q is not a UTF-8 text file", name)
	}
	return string(data), info, nil
}
