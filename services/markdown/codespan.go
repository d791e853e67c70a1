package markdown

import (
	"sort"
	"strings"
)

// span is a half-open byte range [start, end) of a string.
type span struct{ start, end int }

// codeSpans returns the byte ranges of s that are Markdown code: fenced code
// blocks (``` or ~~~, fence lines included, an unclosed fence runs to the end)
// and inline code spans (a run of n backticks up to the next run of exactly n).
// Backslash escapes are not honoured. The result is sorted and non-overlapping.
func codeSpans(s string) []span {
	var out []span
	textStart := 0 // start of the current stretch of non-fence text
	inFence := false
	var fenceChar byte
	var fenceLen, fenceStart int
	for lineStart := 0; lineStart < len(s); {
		lineEnd := strings.IndexByte(s[lineStart:], '\n')
		next := len(s)
		if lineEnd >= 0 {
			lineEnd += lineStart
			next = lineEnd + 1
		} else {
			lineEnd = len(s)
		}
		line := s[lineStart:lineEnd]
		if inFence {
			if isFenceClose(line, fenceChar, fenceLen) {
				out = append(out, span{fenceStart, lineEnd})
				inFence = false
				textStart = next
			}
		} else if c, n, ok := fenceOpen(line); ok {
			out = append(out, inlineCodeSpans(s, textStart, lineStart)...)
			inFence, fenceChar, fenceLen, fenceStart = true, c, n, lineStart
		}
		lineStart = next
	}
	if inFence {
		out = append(out, span{fenceStart, len(s)})
	} else {
		out = append(out, inlineCodeSpans(s, textStart, len(s))...)
	}
	return out
}

// inlineCodeSpans finds backtick code spans in s[from:to], in linear time.
func inlineCodeSpans(s string, from, to int) []span {
	type run struct{ pos, n int }
	var runs []run
	for i := from; i < to; {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < to && s[j] == '`' {
			j++
		}
		runs = append(runs, run{i, j - i})
		i = j
	}
	// byLen[n] lists the indexes of runs of length n, in order; cursor[n] is
	// how far that list has been consumed.
	byLen := map[int][]int{}
	for k, r := range runs {
		byLen[r.n] = append(byLen[r.n], k)
	}
	cursor := map[int]int{}
	var out []span
	for k := 0; k < len(runs); k++ {
		n := runs[k].n
		list := byLen[n]
		c := cursor[n]
		for c < len(list) && list[c] <= k {
			c++
		}
		cursor[n] = c
		if c == len(list) {
			continue // unmatched run: literal backticks
		}
		closer := list[c]
		out = append(out, span{runs[k].pos, runs[closer].pos + n})
		k = closer
	}
	return out
}

// fenceOpen reports whether line opens a fenced code block, and with which
// character and fence length.
func fenceOpen(line string) (byte, int, bool) {
	line = strings.TrimSuffix(line, "\r")
	indent := 0
	for indent < len(line) && line[indent] == ' ' {
		indent++
	}
	if indent > 3 || indent >= len(line) {
		return 0, 0, false
	}
	c := line[indent]
	if c != '`' && c != '~' {
		return 0, 0, false
	}
	n := 0
	for indent+n < len(line) && line[indent+n] == c {
		n++
	}
	if n < 3 {
		return 0, 0, false
	}
	if c == '`' && strings.IndexByte(line[indent+n:], '`') >= 0 {
		return 0, 0, false
	}
	return c, n, true
}

// isFenceClose reports whether line closes a fence opened with n × c.
func isFenceClose(line string, c byte, n int) bool {
	line = strings.TrimRight(line, " \t\r")
	indent := 0
	for indent < len(line) && line[indent] == ' ' {
		indent++
	}
	if indent > 3 {
		return false
	}
	rest := line[indent:]
	if len(rest) < n {
		return false
	}
	return strings.Trim(rest, string(c)) == ""
}

// inSpans reports whether byte offset i lies in one of the sorted spans.
func inSpans(spans []span, i int) bool {
	k := sort.Search(len(spans), func(k int) bool { return spans[k].end > i })
	return k < len(spans) && spans[k].start <= i
}
