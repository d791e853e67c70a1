package telegram

import (
	"strings"
	"unicode/utf8"
)

// maxTableWidth is the widest table, in characters, rendered as aligned
// columns: about what a phone shows of a monospace line in Telegram. A
// wider table is rendered one line per row.
const maxTableWidth = 36

// maxTableCells bounds the columns of a table; a wider one stays text.
const maxTableCells = 32

// span is a part of the source, [start, end).
type span struct{ start, end int }

// tableRow is one line of a table: the line and its cells' trimmed content.
type tableRow struct {
	line  span
	cells []span
}

// table renders the Markdown (GFM) table starting at start — a header row,
// a delimiter row (|---|:--:|) with as many cells, and at least one data
// row — and returns the end of its last line. It reports false, adding
// nothing, when no table starts there. A table that fits in maxTableWidth
// is a <pre> block with aligned columns; a wider one is a line per row,
// the header's bold, the cells separated by " · " (an empty one "—").
func (b *builder) table(start int) (int, bool) {
	src := b.src
	head, ok := b.tableLine(start)
	if !ok || head.line.end == len(src) {
		return 0, false
	}
	delim, ok := b.tableLine(head.line.end + 1)
	if !ok || len(delim.cells) != len(head.cells) || !isDelimiterRow(src, delim) {
		return 0, false
	}
	var rows []tableRow
	for j := delim.line.end; j < len(src); {
		r, ok := b.tableLine(j + 1)
		if !ok || isDelimiterRow(src, r) {
			break
		}
		rows = append(rows, r)
		j = r.line.end
	}
	if len(rows) == 0 {
		return 0, false
	}
	n := len(head.cells)
	widths := make([]int, n)
	for _, r := range append([]tableRow{head}, rows...) {
		for k, c := range r.cells[:min(n, len(r.cells))] {
			widths[k] = max(widths[k], b.cellWidth(c))
		}
	}
	total := 3 * (n - 1)
	for _, w := range widths {
		total += w
	}
	if align := b.alignments(delim); total <= maxTableWidth && b.preTable(head, delim, rows, widths, align, false) {
		b.preTable(head, delim, rows, widths, align, true)
	} else {
		b.rowTable(head, delim, rows)
	}
	return rows[len(rows)-1].line.end, true
}

// tableLine reads the line at start as a table row: it has a '|' that is
// not escaped, and at most maxTableCells cells.
func (b *builder) tableLine(start int) (tableRow, bool) {
	src := b.src
	if start >= len(src) {
		return tableRow{}, false
	}
	end := lineEnd(src, start)
	r := tableRow{line: span{start, end}}
	lo, hi := start, end
	for lo < hi && (src[lo] == ' ' || src[lo] == '\t') {
		lo++
	}
	for hi > lo && (src[hi-1] == ' ' || src[hi-1] == '\t' || src[hi-1] == '\r') {
		hi--
	}
	if lo == hi {
		return tableRow{}, false
	}
	pipes := 0
	if src[lo] == '|' {
		lo++
		pipes++
	}
	cell := lo
	for i := lo; i < hi; i++ {
		switch src[i] {
		case '\\':
			i++ // an escaped character, "\|" included
		case '|':
			r.cells = append(r.cells, trimSpan(src, cell, i))
			cell = i + 1
			pipes++
		}
	}
	if cell < hi || src[hi-1] != '|' || hi == lo {
		r.cells = append(r.cells, trimSpan(src, cell, hi))
	}
	if pipes == 0 || len(r.cells) == 0 || len(r.cells) > maxTableCells {
		return tableRow{}, false
	}
	return r, true
}

func trimSpan(src string, lo, hi int) span {
	for lo < hi && (src[lo] == ' ' || src[lo] == '\t') {
		lo++
	}
	for hi > lo && (src[hi-1] == ' ' || src[hi-1] == '\t') {
		hi--
	}
	return span{lo, hi}
}

// isDelimiterRow reports whether every cell of r is a run of dashes with
// optional colons (:--, --:, :-:).
func isDelimiterRow(src string, r tableRow) bool {
	for _, c := range r.cells {
		s := strings.TrimSuffix(strings.TrimPrefix(src[c.start:c.end], ":"), ":")
		if s == "" || strings.Trim(s, "-") != "" {
			return false
		}
	}
	return true
}

// scanCell walks the cell c as it shows in a <pre> table: "\|" is a pipe,
// "**", "__" and backticks are hidden, other runes are text. f gets each
// piece: its source, and for a piece that is not text its HTML.
func (b *builder) scanCell(c span, f func(i, j int, html string, text bool)) {
	src := b.src
	for i := c.start; i < c.end; {
		switch {
		case strings.HasPrefix(src[i:c.end], `\|`):
			f(i, i+2, "|", false)
			i += 2
		case strings.HasPrefix(src[i:c.end], "**"), strings.HasPrefix(src[i:c.end], "__"):
			f(i, i+2, "", false)
			i += 2
		case src[i] == '`':
			f(i, i+1, "", false)
			i++
		default:
			_, size := utf8.DecodeRuneInString(src[i:c.end])
			f(i, i+size, "", true)
			i += size
		}
	}
}

// cellWidth is the number of characters c shows in a <pre> table.
func (b *builder) cellWidth(c span) int {
	w := 0
	b.scanCell(c, func(_, _ int, html string, text bool) {
		if text {
			w++
		} else {
			w += utf8.RuneCountInString(html)
		}
	})
	return w
}

// maxShare bounds the fixed text (padding, column separators, the rule)
// one source character of a table stands for, so that no unit is too long
// for Split's smallest limit; a table that would need more is rendered one
// line per row.
const maxShare = 8

// spread renders s (text without tags or characters to escape) in place of
// src[lo:hi], shared evenly among its characters, one unit each: every unit
// of a table stands for some source, so every chunk Split makes of it has a
// source. It reports false, adding nothing, when s does not fit: when there
// is no source to stand in for or a share would exceed maxShare. With emit
// false it only checks.
func (b *builder) spread(lo, hi int, s string, emit bool) bool {
	out := []rune(s)
	anchors := utf8.RuneCountInString(b.src[lo:hi])
	if anchors == 0 {
		return len(out) == 0
	}
	q, extra := len(out)/anchors, len(out)%anchors
	if q+min(extra, 1) > maxShare {
		return false
	}
	if !emit {
		return true
	}
	for i := lo; i < hi; {
		_, size := utf8.DecodeRuneInString(b.src[i:hi])
		n := q
		if extra > 0 {
			n, extra = n+1, extra-1
		}
		b.atom(i, i+size, string(out[:n]))
		out = out[n:]
		i += size
	}
	return true
}

// preTable renders a table as aligned columns in a <pre> block, the
// header and the data rows separated by a rule. With emit false it only
// reports whether the table can be rendered so (see spread).
func (b *builder) preTable(head, delim tableRow, rows []tableRow, widths []int, align []byte, emit bool) bool {
	if emit {
		b.openTag(head.line.start, head.line.start, "<pre>", "</pre>", true)
	}
	if !b.preRow(head, widths, align, emit) {
		return false
	}
	if emit {
		b.text(head.line.end, head.line.end+1)
	}
	at := delim.line.start
	for k, c := range delim.cells {
		joint := ""
		if k > 0 {
			joint = "─┼─"
		}
		if !b.spread(at, c.start, joint, emit) || !b.spread(c.start, c.end, strings.Repeat("─", widths[k]), emit) {
			return false
		}
		at = c.end
	}
	b.spread(at, delim.line.end, "", emit)
	for _, r := range rows {
		if emit {
			b.text(r.line.start-1, r.line.start)
		}
		if !b.preRow(r, widths, align, emit) {
			return false
		}
	}
	if emit {
		end := rows[len(rows)-1].line.end
		b.closeTag(end, end)
	}
	return true
}

// alignments are the columns' alignments the delimiter row asks for: 'l'
// (---, :--), 'r' (--:) or 'c' (:-:).
func (b *builder) alignments(delim tableRow) []byte {
	out := make([]byte, len(delim.cells))
	for k, c := range delim.cells {
		d := b.src[c.start:c.end]
		switch left, right := d[0] == ':', d[len(d)-1] == ':'; {
		case left && right && len(d) > 1:
			out[k] = 'c'
		case right && !left:
			out[k] = 'r'
		default:
			out[k] = 'l'
		}
	}
	return out
}

// preRow renders one row's cells padded to widths as align says; the
// source between the cells (pipes, spaces) stands for the column separator
// and the padding. Cells a row lacks at its end are left out; cells past
// the header's are not shown.
func (b *builder) preRow(r tableRow, widths []int, align []byte, emit bool) bool {
	at, owed := r.line.start, ""
	for k, c := range r.cells[:min(len(r.cells), len(widths))] {
		pad := widths[k] - b.cellWidth(c)
		before := map[byte]int{'r': pad, 'c': pad / 2}[align[k]]
		if k > 0 {
			owed += " │ "
		}
		if !b.spread(at, c.start, owed+strings.Repeat(" ", before), emit) {
			return false
		}
		if emit {
			b.scanCell(c, func(i, j int, html string, text bool) {
				if text {
					b.text(i, j)
				} else {
					b.atom(i, j, html)
				}
			})
		}
		owed, at = strings.Repeat(" ", pad-before), c.end
	}
	return b.spread(at, r.line.end, "", emit)
}

// rowTable renders a table too wide for a phone one line per row, the
// header's bold: "a · b · c".
func (b *builder) rowTable(head, delim tableRow, rows []tableRow) {
	b.openTag(head.line.start, head.line.start, "<b>", "</b>", false)
	b.rowLine(head, len(head.cells), denyBold)
	b.closeTag(head.line.end, head.line.end)
	b.text(head.line.end, head.line.end+1)
	b.atom(delim.line.start, rows[0].line.start, "") // the delimiter line
	for ri, r := range rows {
		if ri > 0 {
			b.text(r.line.start-1, r.line.start)
		}
		b.rowLine(r, len(head.cells), 0)
	}
}

// rowLine renders the first n cells of r joined by " · ", an empty one as
// "—".
func (b *builder) rowLine(r tableRow, n int, d deny) {
	at := r.line.start
	for k, c := range r.cells[:min(len(r.cells), n)] {
		sep := ""
		if k > 0 {
			sep = " · "
		}
		if c.start == c.end {
			sep += "—"
		}
		if !b.spread(at, c.start, sep, true) { // the '|' and spaces stand for it
			b.atom(at, c.start, "") // an empty first cell without a leading '|'
		}
		b.inline(c.start, c.end, d)
		at = c.end
	}
	b.spread(at, r.line.end, "", true)
}
