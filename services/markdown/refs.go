package markdown

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"unicode"

	"github.com/switchboard/switchboard/services"
)

// MaxRefLine is the largest line number a reference may name.
const MaxRefLine = 10_000_000

// maxRefLen bounds the text between the brackets of a reference.
const maxRefLen = 512

// Ref is a reference to part of a file (seed 004): lines
// ("[guide.md:12:30]", "[guide.md:12]") or a Markdown section
// ("[guide.md#Intro/Setup]").
type Ref struct {
	// Path is the cleaned, relative file path ("./a//b.md" becomes "a/b.md").
	Path string
	// StartLine and EndLine are the 1-based inclusive range of a line
	// reference (equal for a single line); both 0 for a section reference.
	StartLine, EndLine int
	// HeadingPath is the heading path of a section reference, segments
	// separated by "/"; "" for a line reference.
	HeadingPath string
	// Raw is the reference as written, brackets included.
	Raw string
}

// InvalidRef is text shaped like a reference that cannot be used, with the
// reason, for telling the user.
type InvalidRef struct {
	Raw    string
	Reason string
}

// ParseRefs returns the valid references in text, in order of appearance,
// without duplicates. Invalid ones are skipped; ScanRefs reports them.
func ParseRefs(text string) []Ref {
	refs, _ := ScanRefs(text)
	return refs
}

// ScanRefs returns the valid references in text and, separately, the
// bracketed texts shaped like references that are invalid: empty path,
// absolute path, ".." segment, line 0 or negative, end before start, line
// above MaxRefLine, empty heading. Both lists are in order of appearance and
// without duplicates.
//
// Only "[path:N]", "[path:N:M]" and "[path#Heading]" count, where path has no
// spaces and contains a letter and a "." or "/" (so "[12:30]" is a time, not
// a reference). Brackets inside code spans or fenced code, Markdown links
// "[text](url)" and "[text][label]" are ignored.
func ScanRefs(text string) (refs []Ref, invalid []InvalidRef) {
	seen := map[string]bool{}
	for _, m := range mentions(text) {
		ref, raw := m.ref, m.ref.Raw
		switch {
		case raw == "":
		case m.reason != "":
			if !seen["!"+raw] {
				seen["!"+raw] = true
				invalid = append(invalid, InvalidRef{Raw: raw, Reason: m.reason})
			}
		default:
			key := fmt.Sprintf("%s\x00%d\x00%d\x00%s", ref.Path, ref.StartLine, ref.EndLine, normalizeHeadingPath(ref.HeadingPath))
			if !seen[key] {
				seen[key] = true
				refs = append(refs, ref)
			}
		}
	}
	return refs, invalid
}

// parseRef parses the text between brackets. ok is false when it is not
// shaped like a reference; reason is non-empty when it is, but invalid.
func parseRef(c string) (ref Ref, reason string, ok bool) {
	if p, heading, found := strings.Cut(c, "#"); found {
		if !isRefPathShape(p) {
			return Ref{}, "", false
		}
		segs := strings.Split(heading, "/")
		for i, s := range segs {
			segs[i] = strings.TrimSpace(s)
		}
		ref = Ref{Path: p, HeadingPath: strings.Join(segs, "/")}
		if strings.TrimSpace(heading) == "" {
			return ref, "empty heading", true
		}
	} else {
		parts := strings.Split(c, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return Ref{}, "", false
		}
		for _, n := range parts[1:] {
			if !isSignedDigits(n) {
				return Ref{}, "", false
			}
		}
		p := parts[0]
		if p != "" && !isRefPathShape(p) {
			return Ref{}, "", false
		}
		ref = Ref{Path: p}
		var lines [2]int
		for k, n := range parts[1:] {
			v, why := parseLineNumber(n)
			if why != "" {
				return ref, why, true
			}
			lines[k] = v
		}
		ref.StartLine, ref.EndLine = lines[0], lines[0]
		if len(parts) == 3 {
			ref.EndLine = lines[1]
		}
	}
	if err := ref.Validate(); err != nil {
		return ref, services.ErrorMessage(err), true
	}
	ref.Path = path.Clean(ref.Path)
	return ref, "", true
}

func isSignedDigits(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// parseLineNumber parses s, digits after an optional "-", as a line
// number, or says why it is none.
func parseLineNumber(s string) (int, string) {
	v, _ := strconv.Atoi(s) // out of range: the largest or smallest int
	switch {
	case v < 1:
		return 0, "line numbers start at 1"
	case v > MaxRefLine:
		return 0, fmt.Sprintf("line number above %d", MaxRefLine)
	}
	return v, ""
}

// isRefPathShape reports whether p can be the path of a reference: no
// spaces, control characters or ":", a letter, and a "." or "/".
func isRefPathShape(p string) bool {
	if !strings.ContainsAny(p, "./") || strings.Contains(p, ":") {
		return false
	}
	letter := false
	for _, r := range p {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
		letter = letter || unicode.IsLetter(r)
	}
	return letter
}

// Validate reports why r cannot be resolved, as a services.EINVALID error,
// or nil. ParseRefs only returns valid references; Validate is for Refs built
// elsewhere (a run's explicit references, for instance).
func (r Ref) Validate() error {
	invalid := func(format string, args ...any) error {
		return services.Errorf(services.EINVALID, format, args...)
	}
	switch {
	case r.Path == "":
		return invalid("empty path")
	case strings.HasPrefix(r.Path, "/") || strings.HasPrefix(r.Path, `\`) || strings.HasPrefix(r.Path, "~") ||
		(len(r.Path) >= 2 && r.Path[1] == ':'):
		return invalid("absolute path")
	}
	for _, seg := range strings.FieldsFunc(r.Path, func(c rune) bool { return c == '/' || c == '\\' }) {
		if seg == ".." {
			return invalid("path leaves the workspace (..)")
		}
	}
	if r.HeadingPath != "" {
		if strings.Trim(r.HeadingPath, "/ \t") == "" {
			return invalid("empty heading")
		}
		if r.StartLine != 0 || r.EndLine != 0 {
			return invalid("a section reference has no line numbers")
		}
		return nil
	}
	switch {
	case r.StartLine < 1 || r.EndLine < 1:
		return invalid("line numbers start at 1")
	case r.StartLine > MaxRefLine || r.EndLine > MaxRefLine:
		return invalid("line number above %d", MaxRefLine)
	case r.EndLine < r.StartLine:
		return invalid("end line %d before start line %d", r.EndLine, r.StartLine)
	}
	return nil
}

// ResolvedRef is a reference with the text it points to.
type ResolvedRef struct {
	Ref Ref
	// Text is the referenced lines or section, joined by "\n".
	Text string
	// StartLine and EndLine are the lines actually returned (1-based).
	StartLine, EndLine int
	// TotalLines is the file's line count.
	TotalLines int
	// Clamped is true when the reference ran past the end of the file and
	// EndLine was lowered to the last line.
	Clamped bool
}

// Resolve reads ref's file with readFile and extracts the referenced lines
// (clamped to the end of the file) or Markdown section (see Section). It
// returns EINVALID for an invalid ref or a start line past the end of the
// file, ENOTFOUND for a missing heading or a readFile error wrapping
// fs.ErrNotExist; other readFile errors are wrapped as they are. readFile is
// responsible for confining paths to the workspace.
func Resolve(ref Ref, readFile func(path string) ([]byte, error)) (ResolvedRef, error) {
	if err := ref.Validate(); err != nil {
		return ResolvedRef{}, err
	}
	data, err := readFile(ref.Path)
	if err != nil {
		var domainErr *services.Error
		if errors.Is(err, fs.ErrNotExist) && !errors.As(err, &domainErr) {
			return ResolvedRef{}, &services.Error{Kind: services.ENOTFOUND, Message: fmt.Sprintf("file %s not found", ref.Path), Err: err}
		}
		return ResolvedRef{}, fmt.Errorf("markdown: read %s: %w", ref.Path, err)
	}
	doc := string(data)
	lines := splitLines(doc)
	res := ResolvedRef{Ref: ref, TotalLines: len(lines)}
	if ref.HeadingPath != "" {
		text, start, end, ok := Section(doc, ref.HeadingPath)
		if !ok {
			return ResolvedRef{}, services.Errorf(services.ENOTFOUND, "heading %q not found in %s", ref.HeadingPath, ref.Path)
		}
		res.Text, res.StartLine, res.EndLine = text, start, end
		return res, nil
	}
	if ref.StartLine > len(lines) {
		return ResolvedRef{}, services.Errorf(services.EINVALID, "%s has %d lines, reference starts at line %d", ref.Path, len(lines), ref.StartLine)
	}
	res.StartLine, res.EndLine = ref.StartLine, min(ref.EndLine, len(lines))
	res.Clamped = res.EndLine < ref.EndLine
	res.Text = strings.Join(lines[res.StartLine-1:res.EndLine], "\n")
	return res, nil
}
