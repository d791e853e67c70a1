package markdown

import (
	"fmt"
	"slices"
	"strings"
)

// MaxAtPaths is how many @path mentions a reminder names (seed 002, A7);
// further ones are summarised as "(and N more…)".
const MaxAtPaths = 5

// ReadToolName is the tool the @path reminder tells the model to call.
const ReadToolName = "read_file"

// ParseAtPaths returns the @path mentions in user input, such as
// "@docs/setup.md" or "@main.go", in order of first appearance and without
// duplicates. It returns every mention; AtPathReminder names the first
// MaxAtPaths.
//
// Following seed 002 (A7), a path is made of ASCII letters, digits and
// "/._-" (no spaces). Not a mention: an "@" preceded by a letter, digit or
// path character (e-mail addresses, URLs like x.com/@user), an "@" inside a
// backtick code span or fenced code block, a name with neither "." nor "/"
// (Telegram @usernames; write "@./Makefile" for such files), absolute paths
// and paths with ".." segments. Trailing dots (sentence punctuation) are
// stripped.
func ParseAtPaths(input string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range mentions(input) {
		if m.path != "" && !seen[m.path] {
			seen[m.path] = true
			out = append(out, m.path)
		}
	}
	return out
}

// trimDots drops the dots ending p: sentence punctuation.
func trimDots(p string) string { return strings.TrimRight(p, ".") }

func isPathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '/' || c == '.' || c == '_' || c == '-'
}

// isMentionPath reports whether p looks like a project-relative file path:
// not absolute, with a "." or "/", a character other than "/._-", and no
// ".." segment.
func isMentionPath(p string) bool {
	return p != "" && p[0] != '/' && strings.ContainsAny(p, "./") &&
		strings.Trim(p, "/._-") != "" && !slices.Contains(strings.Split(p, "/"), "..")
}

// AtPathReminder returns the system-reminder appended to a user message that
// mentions paths (seed 002, A7/C3): it names at most MaxAtPaths of them, adds
// "(and N more…)" for the rest, and tells the model to read them with
// ReadToolName before answering. It never contains file contents. It returns
// "" for no paths.
func AtPathReminder(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	shown := paths[:min(len(paths), MaxAtPaths)]
	var b strings.Builder
	b.WriteString("<system-reminder>\nThe user mentioned ")
	for i, p := range shown {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("@" + p)
	}
	if more := len(paths) - len(shown); more > 0 {
		fmt.Fprintf(&b, " (and %d more…)", more)
	}
	b.WriteString(".\n")
	if len(paths) == 1 {
		fmt.Fprintf(&b, "You MUST read this file with the %s tool before answering.\n", ReadToolName)
	} else {
		fmt.Fprintf(&b, "You MUST read these files with the %s tool, one by one in this order, before answering.\n", ReadToolName)
	}
	b.WriteString("</system-reminder>")
	return b.String()
}

// WithAtPathReminder returns input with the reminder for its @path mentions
// appended after a blank line, or input unchanged when it mentions none.
func WithAtPathReminder(input string) string {
	r := AtPathReminder(ParseAtPaths(input))
	if r == "" {
		return input
	}
	return input + "\n\n" + r
}
