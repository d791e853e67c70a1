package tools

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// HistoryForm writes the form a tool result keeps in history once it is
// no longer in the newest turn, from the call's arguments and the result's
// Content. ok false (an error result, a result of another shape) leaves
// the result to the rule's field rules (MaxChars, KeepFields, DropFields).
// A tool picks one of ListForm, SearchForm, ReadForm, EditForm, WriteForm
// and LineForm (HistoryRule.Form).
type HistoryForm func(args, result string) (form string, ok bool)

// Bounds of the history forms.
const (
	// FormReadLines and FormReadBytes bound ReadForm: the range read,
	// numbered, at most this many lines and bytes.
	FormReadLines = 500
	FormReadBytes = 20000
	// FormListEntries are the entries list_files keeps.
	FormListEntries = 20
	// FormSearchMatches are the matches SearchForm keeps.
	FormSearchMatches = 5
	// FormWriteLines are the lines of written content WriteForm keeps.
	FormWriteLines = 30
	// FormSnippetLines are the lines of new text EditForm keeps.
	FormSnippetLines = 8
	// formReadLineBytes bounds one line of a read (a minified file's).
	formReadLineBytes = 1000
	// formLineBytes bounds one kept line of a listing, match or snippet.
	formLineBytes = 200
	// formSnippetBytes bounds a write's or an edit's kept text.
	formSnippetBytes = 2000
)

// decodeObject reads a JSON object result; an error result is not one.
func decodeObject(s string) (map[string]any, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil || m == nil {
		return nil, false
	}
	if _, isErr := m["error"]; isErr {
		return nil, false
	}
	return m, true
}

func fieldText(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

func fieldInt(m map[string]any, k string) int {
	f, _ := m[k].(float64)
	return int(f)
}

func fieldBool(m map[string]any, k string) bool { b, _ := m[k].(bool); return b }

// oneLine cuts s to its first line of at most n bytes, marking a cut.
func oneLine(s string, n int) string {
	s = strings.TrimRight(s, "\r\n")
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = s[:i], true
	}
	if len(s) > n {
		s, cut = s[:runeStart(s, n)], true
	}
	if cut {
		s += "…"
	}
	return s
}

// runeStart is the largest rune boundary of s at or below i.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return i
}

// headLines is the first n lines of s within maxBytes, and how many lines
// s has in all.
func headLines(s string, n, maxBytes int) (string, int, int) {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return "", 0, 0
	}
	lines := strings.Split(s, "\n")
	var b strings.Builder
	kept := 0
	for _, ln := range lines {
		if kept == n || b.Len()+len(ln)+1 > maxBytes {
			break
		}
		b.WriteString(ln)
		b.WriteByte('\n')
		kept++
	}
	return b.String(), kept, len(lines)
}

// ListForm keeps a listing as its directory, its counts (entries, of which
// directories and files) and the first n entries, one word each (a
// directory ends in "/"). The result's shape is list_files's: path,
// entries (path, type), total, truncated.
func ListForm(n int) HistoryForm {
	return func(_, result string) (string, bool) {
		m, ok := decodeObject(result)
		if !ok {
			return "", false
		}
		entries, ok := m["entries"].([]any)
		if !ok {
			return "", false
		}
		total := max(fieldInt(m, "total"), len(entries))
		dirs, files := 0, 0
		var names []string
		for _, e := range entries {
			em, _ := e.(map[string]any)
			name := fieldText(em, "path")
			switch fieldText(em, "type") {
			case "dir":
				dirs++
				name += "/"
			case "file":
				files++
			}
			if len(names) < n {
				names = append(names, oneLine(name, formLineBytes))
			}
		}
		dir := fieldText(m, "path")
		if dir == "" {
			dir = "."
		}
		var b strings.Builder
		fmt.Fprintf(&b, "[listed %s: %d entries (%d dirs, %d files among the %d returned)", dir, total, dirs, files, len(entries))
		if fieldBool(m, "truncated") {
			b.WriteString(", listing cut")
		}
		b.WriteString("]")
		if len(names) > 0 {
			fmt.Fprintf(&b, "\nfirst %d: %s", len(names), strings.Join(names, ", "))
		}
		if more := total - len(names); more > 0 {
			fmt.Fprintf(&b, " (and %d more)", more)
		}
		return b.String(), true
	}
}

// SearchFields name where a search result keeps its matches: the array
// (Matches), the fields that say where a match is, joined by ":" (Where,
// e.g. file and line), and its text (Text). Query names the searched words.
type SearchFields struct {
	Query   string
	Matches string
	Where   []string
	Text    string
}

// WorkspaceSearch is the shape of the search tool's results.
var WorkspaceSearch = SearchFields{Query: "query", Matches: "matches", Where: []string{"file", "line"}, Text: "text"}

// SearchForm keeps a search as a summary (the query, how many matches in
// how many places, whether more were not returned) and the first
// FormSearchMatches matches as "where: text" (file:line for a file search).
func SearchForm(f SearchFields) HistoryForm {
	return func(_, result string) (string, bool) {
		m, ok := decodeObject(result)
		if !ok {
			return "", false
		}
		matches, ok := m[f.Matches].([]any)
		if !ok {
			return "", false
		}
		places := map[string]bool{}
		var lines []string
		for _, x := range matches {
			xm, _ := x.(map[string]any)
			var where []string
			for _, w := range f.Where {
				where = append(where, fieldText(xm, w))
			}
			places[fieldText(xm, f.Where[0])] = true
			if len(lines) < FormSearchMatches {
				lines = append(lines, strings.Join(where, ":")+": "+oneLine(fieldText(xm, f.Text), formLineBytes))
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "[searched %q: %d matches", fieldText(m, f.Query), len(matches))
		if len(f.Where) > 1 {
			fmt.Fprintf(&b, " in %d %ss", len(places), f.Where[0])
		}
		if fieldBool(m, "truncated") || fieldInt(m, "more") > 0 {
			b.WriteString(", more not returned")
		}
		b.WriteString("]")
		if len(lines) > 0 {
			fmt.Fprintf(&b, "\nfirst %d:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		if more := len(matches) - len(lines); more > 0 {
			fmt.Fprintf(&b, "\n(and %d more)", more)
		}
		return b.String(), true
	}
}

// ReadForm keeps a read as the range read with line numbers: at most
// FormReadLines lines and FormReadBytes bytes from the start of the range
// (the rest named, to be read again). The result's shape is read_file's
// (path, start_line, end_line, content); content the call already
// numbered (line_numbers) is not numbered twice.
func ReadForm() HistoryForm {
	return func(args, result string) (string, bool) {
		m, ok := decodeObject(result)
		if !ok {
			return "", false
		}
		content, ok := m["content"].(string)
		if !ok {
			return "", false
		}
		var a struct {
			LineNumbers bool `json:"line_numbers"`
		}
		_ = json.Unmarshal([]byte(args), &a)
		start, end := max(fieldInt(m, "start_line"), 1), fieldInt(m, "end_line")
		lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
		var b strings.Builder
		fmt.Fprintf(&b, "[read %s, lines %d-%d", fieldText(m, "path"), start, end)
		if h := fieldText(m, "heading"); h != "" {
			fmt.Fprintf(&b, ", section %q", h)
		}
		if fieldBool(m, "changed_since_last_read") {
			b.WriteString(", changed since the read before")
		}
		b.WriteString("]")
		last := start - 1
		for i, ln := range lines {
			if content == "" {
				break
			}
			row := ln
			if len(row) > formReadLineBytes {
				row = row[:runeStart(row, formReadLineBytes)] + fmt.Sprintf("…[%d bytes cut]", len(ln)-runeStart(row, formReadLineBytes))
			}
			if !a.LineNumbers {
				row = fmt.Sprintf("%6d\t%s", start+i, row)
			}
			if i == FormReadLines || b.Len()+len(row)+1 > FormReadBytes {
				break
			}
			b.WriteString("\n" + row)
			last = start + i
		}
		if last < end {
			fmt.Fprintf(&b, "\n[lines %d-%d not kept in history; read them again if needed]", last+1, end)
		}
		return b.String(), true
	}
}

// formPath is the path argument of the calls EditForm and WriteForm keep.
type formPath struct {
	Path string `json:"path"`
}

func (p formPath) path() string { return p.Path }

// writtenFile reads what EditForm and WriteForm share: the result object,
// the call's arguments into a (a struct embedding formPath), and the file's
// path (the result's, else the argument's); ok is false when either is not
// the JSON object expected.
func writtenFile(args, result string, a interface{ path() string }) (map[string]any, string, bool) {
	m, ok := decodeObject(result)
	if !ok {
		return nil, "", false
	}
	if json.Unmarshal([]byte(args), a) != nil {
		return nil, "", false
	}
	path := fieldText(m, "path")
	if path == "" {
		path = a.path()
	}
	return m, path, true
}

// EditForm keeps an edit as its file, the range the new text took and
// the first FormSnippetLines lines of that text (the key snippet), from
// edit_file's arguments (path, new_text) and result (replacements,
// first_line).
func EditForm() HistoryForm {
	return func(args, result string) (string, bool) {
		var a struct {
			formPath
			NewText string `json:"new_text"`
		}
		m, path, ok := writtenFile(args, result, &a)
		if !ok {
			return "", false
		}
		first := fieldInt(m, "first_line")
		snippet, kept, total := headLines(a.NewText, FormSnippetLines, formSnippetBytes)
		var b strings.Builder
		fmt.Fprintf(&b, "[edited %s: %d replacement(s)", path, max(fieldInt(m, "replacements"), 1))
		if first > 0 {
			fmt.Fprintf(&b, ", lines %d-%d now", first, first+max(total, 1)-1)
		}
		b.WriteString("]")
		if total == 0 {
			b.WriteString("\n(the old text was removed)")
		} else {
			b.WriteString("\n" + strings.TrimSuffix(snippet, "\n"))
			if kept < total {
				fmt.Fprintf(&b, "\n[%d more lines of the new text not kept]", total-kept)
			}
		}
		return b.String(), true
	}
}

// WriteForm keeps a write as new, overwritten or appended, its size and
// the first FormWriteLines lines written, from write_file's arguments
// (path, content) and result (created, appended, size).
func WriteForm() HistoryForm {
	return func(args, result string) (string, bool) {
		var a struct {
			formPath
			Content string `json:"content"`
		}
		m, path, ok := writtenFile(args, result, &a)
		if !ok {
			return "", false
		}
		how := "overwrote"
		switch {
		case fieldBool(m, "appended"):
			how = "appended to"
		case fieldBool(m, "created"):
			how = "created (new file)"
		}
		head, kept, total := headLines(a.Content, FormWriteLines, formSnippetBytes)
		var b strings.Builder
		written := fieldInt(m, "bytes_written")
		if written == 0 {
			written = len(a.Content)
		}
		fmt.Fprintf(&b, "[%s %s: %d bytes written, %d lines; the file is %d bytes]", how, path, written, total, fieldInt(m, "size"))
		if total > 0 {
			fmt.Fprintf(&b, "\nfirst %d lines:\n%s", kept, strings.TrimSuffix(head, "\n"))
		}
		if kept < total {
			fmt.Fprintf(&b, "\n[%d more lines not kept in history]", total-kept)
		}
		return b.String(), true
	}
}

// LineForm keeps a result as one line written by line from the result
// (e.g. the todo tool's: the list itself is in the prompt's recap).
func LineForm(line func(result map[string]any) string) HistoryForm {
	return func(_, result string) (string, bool) {
		m, ok := decodeObject(result)
		if !ok {
			return "", false
		}
		return oneLine(line(m), formLineBytes), true
	}
}
