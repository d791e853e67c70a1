package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services"
)

// WorkspaceFor returns the workspace of a timeline; (*Workspaces).For is one.
// It must return the same *Workspace for the same scope on every call, or
// read_file cannot tell what changed since the last read.
type WorkspaceFor func(timelineScope string) (*Workspace, error)

// Limits of the workspace tools.
const (
	maxListEntries    = 500
	maxListCount      = 100_000 // stop counting "and N more" here
	defaultMaxResults = 50
	maxMaxResults     = 200
	maxSearchLineText = 200
	binarySniffBytes  = 8 << 10
	tmpFilePrefix     = ".switchboard-tmp-"
)

// RegisterWorkspaceTools registers read_file, write_file, edit_file,
// list_files and search, each working in the workspace of the calling
// timeline.
func RegisterWorkspaceTools(reg *Registry, ws WorkspaceFor) error {
	t := workspaceTools{ws: ws}
	for _, tool := range []Tool{
		Func("read_file", services.EffectRead, "Read a text file from your workspace. Returns its content (at most 256 KiB per call; "+
			"use offset_line and max_lines to page), size and mtime, and changed_since_last_read when the file "+
			"changed since you last read it.", t.readFile).
			WithHistory(HistoryRule{
				MaxChars:   1000,
				KeepFields: []string{"path", "size", "mtime", "start_line", "end_line", "truncated", "changed_since_last_read", "content"},
				Form:       ReadForm(),
			}),
		Func("write_file", services.EffectWorkspace, "Write a text file in your workspace, creating parent directories. Replaces the file "+
			"atomically, or appends with append=true. At most 1 MiB per call.", t.writeFile).
			WithHistory(HistoryRule{MaxChars: 300, Form: WriteForm()}),
		Func("edit_file", services.EffectWorkspace, "Change part of a text file in your workspace: replace old_text (exact, unique unless "+
			"replace_all) with new_text. Cheaper and safer than rewriting the whole file with write_file.", t.editFile).
			WithHistory(HistoryRule{MaxChars: 300, Form: EditForm()}),
		Func("read_block", services.EffectRead, "Read one section of a Markdown file in your workspace by its heading path (e.g. \"Plan / Risks\").", t.readBlock).
			WithHistory(HistoryRule{MaxChars: 1000, KeepFields: []string{"path", "heading", "start_line", "end_line", "content"}, Form: ReadForm()}),
		Func("replace_block", services.EffectWorkspace, "Replace the body of one section of a Markdown file in your workspace (below its heading, "+
			"down to the next heading of the same or a higher level), found by its heading path.", t.replaceBlock).
			WithHistory(HistoryRule{MaxChars: 300}),
		Func("list_files", services.EffectRead, "List files and directories in your workspace with type, size and mtime (at most 500 entries).", t.listFiles).
			WithHistory(HistoryRule{MaxChars: 1500, Form: ListForm(FormListEntries)}),
		Func("search", services.EffectRead, "Search the text files of your workspace for a plain substring, ignoring case. "+
			"Returns file, line number and line text for each match. Skips binary files and files over 1 MiB.", t.search).
			WithHistory(HistoryRule{MaxChars: 1200, DropFields: []string{"files_searched"}, Form: SearchForm(WorkspaceSearch)}),
	} {
		if err := reg.Register(tool); err != nil {
			return err
		}
	}
	return nil
}

type workspaceTools struct {
	ws WorkspaceFor
}

func (t workspaceTools) workspace(call Call) (*Workspace, error) {
	w, err := t.ws(call.TimelineScope)
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, services.Errorf(services.EINTERNAL, "no workspace for timeline %q", call.TimelineScope)
	}
	return w, nil
}

func badArgument(format string, args ...any) error {
	return services.CodedErrorf(services.EINVALID, CodeBadArguments, format, args...)
}

// shownPath is how a result names the model's path: cleaned, with slashes.
func shownPath(p string) string { return filepath.ToSlash(filepath.Clean(p)) }

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

type readFileArgs struct {
	Path        string `json:"path" jsonschema:"File path relative to the workspace root."`
	OffsetLine  int    `json:"offset_line,omitempty" jsonschema:"First line to return, 1-based. Default 1."`
	MaxLines    int    `json:"max_lines,omitempty" jsonschema:"Maximum number of lines to return. Default: as many as fit."`
	LineNumbers bool   `json:"line_numbers,omitempty" jsonschema:"Prefix each line with its number. Default false."`
}

type readFileResult struct {
	Path                 string `json:"path"`
	Size                 int64  `json:"size"`
	Mtime                string `json:"mtime"`
	StartLine            int    `json:"start_line"`
	EndLine              int    `json:"end_line"`
	Content              string `json:"content"`
	Truncated            bool   `json:"truncated,omitempty"`
	ChangedSinceLastRead bool   `json:"changed_since_last_read,omitempty"`
	Note                 string `json:"note,omitempty"`
}

func (t workspaceTools) readFile(ctx context.Context, call Call, a readFileArgs) (Result, error) {
	if a.OffsetLine == 0 {
		a.OffsetLine = 1
	}
	if a.OffsetLine < 1 {
		return Result{}, badArgument("argument \"offset_line\" must be at least 1, got %d", a.OffsetLine)
	}
	if a.MaxLines < 0 {
		return Result{}, badArgument("argument \"max_lines\" must be positive, got %d", a.MaxLines)
	}
	w, err := t.workspace(call)
	if err != nil {
		return Result{}, err
	}
	rel, err := w.Resolve(a.Path)
	if err != nil {
		return Result{}, err
	}
	f, info, err := w.open(a.Path, rel)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()

	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(binarySniffBytes)
	if bytes.IndexByte(head, 0) >= 0 {
		return Result{}, services.Errorf(services.EINVALID, "%q looks like a binary file (it contains NUL bytes); read_file returns text only", a.Path)
	}
	res := readFileResult{
		Path:      shownPath(a.Path),
		Size:      info.Size(),
		Mtime:     formatTime(info.ModTime()),
		StartLine: a.OffsetLine,
	}
	content, err := readLines(ctx, br, a, &res)
	if err != nil {
		return Result{}, fsError("read", a.Path, err)
	}
	res.Content = content
	res.ChangedSinceLastRead = w.noteRead(call.ContextScope, rel, info)
	if res.ChangedSinceLastRead {
		res.Note = joinNote(res.Note, "the file changed since you last read it; what you saw before is stale")
	}
	return withUntrusted(w.untrustedOf(rel))(JSONResult(res))
}

// readLines copies lines a.OffsetLine.. of br into the result's content,
// stopping at a.MaxLines lines or MaxReadBytes bytes, and sets EndLine,
// Truncated and Note. Lines are cut on byte boundaries only at the size cap,
// and then on a UTF-8 boundary.
func readLines(ctx context.Context, br *bufio.Reader, a readFileArgs, res *readFileResult) (string, error) {
	var out strings.Builder
	line, atLineStart, capped := 1, true, false
	lastLine := a.OffsetLine
	if a.MaxLines > 0 {
		lastLine = a.OffsetLine + a.MaxLines - 1
	}
	for i := 0; ; i++ {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		if a.MaxLines > 0 && line > lastLine {
			if _, err := br.Peek(1); err == nil {
				res.Truncated = true
				res.Note = fmt.Sprintf("showing lines %d-%d; continue with offset_line=%d", a.OffsetLine, res.EndLine, line)
			}
			break
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && line >= a.OffsetLine {
			prefix := ""
			if atLineStart && a.LineNumbers {
				prefix = fmt.Sprintf("%6d\t", line)
			}
			if room := MaxReadBytes - out.Len() - len(prefix); len(chunk) > room {
				if room > 0 {
					cut := room
					for cut > 0 && !utf8.RuneStart(chunk[cut]) {
						cut--
					}
					out.WriteString(prefix)
					out.Write(chunk[:cut])
					res.EndLine = line
				}
				capped = true
				break
			}
			out.WriteString(prefix)
			out.Write(chunk)
			res.EndLine = line
		}
		if len(chunk) > 0 {
			atLineStart = chunk[len(chunk)-1] == '\n'
			if atLineStart {
				line++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
	switch {
	case capped:
		res.Truncated = true
		res.Note = fmt.Sprintf("output capped at %d KiB of a %d-byte file; line %d may be cut; continue with offset_line=%d",
			MaxReadBytes>>10, res.Size, line, line)
		if res.EndLine == a.OffsetLine {
			res.Note = fmt.Sprintf("line %d alone is longer than %d KiB; only its start is shown", line, MaxReadBytes>>10)
		}
	case res.EndLine == 0:
		total := line
		if atLineStart {
			total = line - 1
		}
		if a.OffsetLine > 1 {
			res.Note = fmt.Sprintf("offset_line %d is past the end of the file (%d lines)", a.OffsetLine, total)
		}
	}
	return out.String(), nil
}

// withUntrusted marks a successful result as carrying untrusted text of
// origin o (Result.Untrusted; nil: none).
func withUntrusted(o *services.Origin) func(Result, error) (Result, error) {
	return func(r Result, err error) (Result, error) {
		if err == nil {
			r.Untrusted = o
		}
		return r, err
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"File path relative to the workspace root."`
	Content string `json:"content" jsonschema:"The text to write."`
	Append  bool   `json:"append,omitempty" jsonschema:"Append to the file instead of replacing it. Default false."`
}

type writeFileResult struct {
	Path         string `json:"path"`
	BytesWritten int    `json:"bytes_written"`
	Size         int64  `json:"size"`
	Mtime        string `json:"mtime"`
	Created      bool   `json:"created"`
	Appended     bool   `json:"appended,omitempty"`
}

func (t workspaceTools) writeFile(ctx context.Context, call Call, a writeFileArgs) (Result, error) {
	w, err := t.workspace(call)
	if err != nil {
		return Result{}, err
	}
	rel, err := w.resolveWrite(a.Path)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	before, after, err := w.writeFile(a.Path, rel, []byte(a.Content), a.Append, call.RunID)
	if err != nil {
		return Result{}, err
	}
	w.noteWrite(call.ContextScope, rel, before, after, a.Append)
	if err := w.noteRecapWrite(call, rel, !a.Append || before == nil); err != nil {
		return Result{}, err
	}
	return JSONResult(writeFileResult{
		Path:         shownPath(a.Path),
		BytesWritten: len(a.Content),
		Size:         after.Size(),
		Mtime:        formatTime(after.ModTime()),
		Created:      before == nil,
		Appended:     a.Append && before != nil,
	})
}

type listFilesArgs struct {
	Path      string `json:"path,omitempty" jsonschema:"Directory relative to the workspace root. Default: the root."`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"Include subdirectories. Default false."`
}

// fileEntry is one file or directory as list_files shows it. Symlinks are
// listed but never followed, and their targets are not shown: they may name
// host paths.
type fileEntry struct {
	Path  string `json:"path"`
	Type  string `json:"type"` // file, dir, symlink or other
	Size  int64  `json:"size,omitempty"`
	Mtime string `json:"mtime"`
}

type listFilesResult struct {
	Path      string      `json:"path"`
	Entries   []fileEntry `json:"entries"`
	Total     int         `json:"total"`
	Truncated bool        `json:"truncated,omitempty"`
	Note      string      `json:"note,omitempty"`
}

func entryOf(p string, info fs.FileInfo) fileEntry {
	e := fileEntry{Path: p, Mtime: formatTime(info.ModTime())}
	switch m := info.Mode(); {
	case m.IsRegular():
		e.Type, e.Size = "file", info.Size()
	case m.IsDir():
		e.Type = "dir"
	case m&fs.ModeSymlink != 0:
		e.Type = "symlink"
	default:
		e.Type = "other"
	}
	return e
}

func (t workspaceTools) listFiles(ctx context.Context, call Call, a listFilesArgs) (Result, error) {
	if a.Path == "" {
		a.Path = "."
	}
	w, err := t.workspace(call)
	if err != nil {
		return Result{}, err
	}
	rel, err := w.Resolve(a.Path)
	if err != nil {
		return Result{}, err
	}
	res := listFilesResult{Path: shownPath(a.Path), Entries: []fileEntry{}}
	add := func(p string, info fs.FileInfo) {
		res.Total++
		if len(res.Entries) < maxListEntries {
			res.Entries = append(res.Entries, entryOf(displayPath(res.Path, rel, p), info))
		}
	}
	err = walk(ctx, w, rel, a.Recursive, func(p string, d fs.DirEntry) error {
		info, err := d.Info()
		if err != nil {
			return nil // vanished while listing
		}
		add(p, info)
		if res.Total >= maxListCount {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return Result{}, fsError("list", a.Path, err)
	}
	if res.Total > len(res.Entries) {
		res.Truncated = true
		more := fmt.Sprintf("%d", res.Total-len(res.Entries))
		if res.Total >= maxListCount {
			more = "at least " + more
		}
		res.Note = fmt.Sprintf("showing the first %d entries, and %s more; list a subdirectory to see them", len(res.Entries), more)
	}
	return JSONResult(res)
}

// walk calls fn for what lies under rel (a path returned by Resolve): its
// entries, or with recursive everything beneath it in lexical order, or rel
// itself when it is not a directory. It never follows symlinks and skips
// write_file's temporary files. Paths passed to fn are slash-separated and
// relative to the workspace root.
func walk(ctx context.Context, w *Workspace, rel string, recursive bool, fn func(p string, d fs.DirEntry) error) error {
	fsys := w.root.FS()
	start := filepath.ToSlash(rel)
	info, err := w.root.Lstat(rel)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		err := fn(start, fs.FileInfoToDirEntry(info))
		if errors.Is(err, fs.SkipAll) {
			return nil
		}
		return err
	}
	n := 0
	return fs.WalkDir(fsys, start, func(p string, d fs.DirEntry, err error) error {
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err != nil {
			if p == start {
				return err
			}
			return nil // unreadable subdirectory: list what we can
		}
		if p == start {
			return nil
		}
		if strings.HasPrefix(d.Name(), tmpFilePrefix) {
			return nil
		}
		if err := fn(p, d); err != nil {
			return err
		}
		if d.IsDir() && !recursive {
			return fs.SkipDir
		}
		return nil
	})
}

// displayPath maps p, a slash path relative to the workspace root found by
// walking rel (Resolve's result for the model's path shownRoot), back to the
// model's spelling, in case shownRoot went through a symlink.
func displayPath(shownRoot, rel, p string) string {
	sub := p
	if rel != "." {
		sub = strings.TrimPrefix(strings.TrimPrefix(p, filepath.ToSlash(rel)), "/")
	}
	return path.Join(shownRoot, sub)
}

// readAtMost reads the regular file p (slash path relative to the root), or
// fails when it has grown past limit since it was listed.
func readAtMost(w *Workspace, p string, limit int64) ([]byte, error) {
	f, err := w.root.Open(filepath.FromSlash(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = errors.New("file too large")
	}
	return data, err
}

type searchArgs struct {
	Query      string `json:"query" jsonschema:"Text to find (not a regular expression)."`
	Path       string `json:"path,omitempty" jsonschema:"Directory or file to search, relative to the workspace root. Default: the root."`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"Maximum matches to return, 1 to 200. Default 50."`
}

type searchMatch struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

type searchResult struct {
	Query         string        `json:"query"`
	Matches       []searchMatch `json:"matches"`
	Truncated     bool          `json:"truncated,omitempty"`
	FilesSearched int           `json:"files_searched"`
	FilesSkipped  int           `json:"files_skipped,omitempty"`
	Note          string        `json:"note,omitempty"`
}

func (t workspaceTools) search(ctx context.Context, call Call, a searchArgs) (Result, error) {
	if strings.TrimSpace(a.Query) == "" {
		return Result{}, badArgument("argument \"query\" is empty")
	}
	switch {
	case a.MaxResults == 0:
		a.MaxResults = defaultMaxResults
	case a.MaxResults < 0 || a.MaxResults > maxMaxResults:
		return Result{}, badArgument("argument \"max_results\" must be between 1 and %d, got %d", maxMaxResults, a.MaxResults)
	}
	if a.Path == "" {
		a.Path = "."
	}
	w, err := t.workspace(call)
	if err != nil {
		return Result{}, err
	}
	rel, err := w.Resolve(a.Path)
	if err != nil {
		return Result{}, err
	}
	query := strings.ToLower(a.Query)
	res := searchResult{Query: a.Query, Matches: []searchMatch{}}
	var untrusted *services.Origin // of the first untrusted file a match came from
	taints := w.readTaint(services.FileTaintFile)
	err = walk(ctx, w, rel, true, func(p string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Size() > MaxSearchFileBytes {
			res.FilesSkipped++
			return nil
		}
		data, err := readAtMost(w, p, MaxSearchFileBytes)
		if err != nil || bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0 {
			res.FilesSkipped++
			return nil
		}
		res.FilesSearched++
		for i, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(strings.ToLower(line), query) {
				continue
			}
			if len(res.Matches) == a.MaxResults {
				res.Truncated = true
				return fs.SkipAll
			}
			res.Matches = append(res.Matches, searchMatch{File: displayPath(shownPath(a.Path), rel, p), Line: i + 1, Text: searchLineText(line)})
			if untrusted == nil {
				untrusted = untrustedIn(taints, p)
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, fsError("search", a.Path, err)
	}
	if res.Truncated {
		res.Note = fmt.Sprintf("stopped after %d matches; narrow the query or the path, or raise max_results (up to %d)", a.MaxResults, maxMaxResults)
	}
	if res.FilesSkipped > 0 {
		res.Note = joinNote(res.Note, fmt.Sprintf("%d binary, unreadable or over-1-MiB files were skipped", res.FilesSkipped))
	}
	return withUntrusted(untrusted)(JSONResult(res))
}

func searchLineText(line string) string {
	line = strings.TrimSpace(line)
	if utf8.RuneCountInString(line) <= maxSearchLineText {
		return line
	}
	r := []rune(line)
	return string(r[:maxSearchLineText]) + "…"
}
