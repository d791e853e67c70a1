package telegram

import (
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// maxTableWidth is the widest table, in characters, rendered as aligned
// columns: about what a phone shows of a monospace line in Telegram. A
// wider table is rendered one line per row.
const maxTableWidth = 36

// maxTableCells bounds the columns of a table; a wider one stays text.
const maxTableCells = 32

// span is a part of the source, [start, end).
type span struct{ start, end int }

// tableRow is one line of a table: the line, its cells' trimmed content
// and their nodes.
type tableRow struct {
	line  span
	cells []span
	nodes []ast.Node
}

// table renders a GitHub-flavoured table at the top level with at least
// one data row: when it fits in maxTableWidth, a <pre> block with aligned
// columns; when wider, a line per row, the header's bold, the cells
// separated by " · " (an empty one "—"). In a <pre> table, which holds no
// tags, the cells show what goldmark parsed with the markers of emphasis,
// strikethrough and code hidden and links as written. Other tables stay
// text.
func (b *builder) table(t *east.Table) {
	head, ok := t.FirstChild().(*east.TableHeader)
	if !ok || b.quoteEnd > 0 || t.Parent() != b.d.Root || !b.d.IsTable(t) {
		return
	}
	var rows []tableRow
	for r := ast.Node(head); r != nil; r = r.NextSibling() {
		row, ok := b.tableRow(r)
		if !ok {
			break
		}
		rows = append(rows, row)
	}
	if len(rows) < 2 {
		return
	}
	n := len(rows[0].cells)
	widths := make([]int, n)
	for _, r := range rows {
		for k := range r.cells[:min(n, len(r.cells))] {
			widths[k] = max(widths[k], b.cellWidth(r, k))
		}
	}
	total := 3 * (n - 1)
	for _, w := range widths {
		total += w
	}
	delim := b.d.Line(rows[0].line.end) + 1
	delimLine := span{b.d.LineStart(delim), b.d.LineEnd(delim)}
	if total > maxTableWidth || !b.preTable(rows, delimLine, widths, t.Alignments) {
		b.rowTable(rows, delimLine)
	}
	// Rows the table took without a '|' (GFM lets a line continue it) stay
	// text.
}

// tableRow reads a row of the table: its line (which has a '|') and the
// cells it has, at most maxTableCells.
func (b *builder) tableRow(r ast.Node) (tableRow, bool) {
	var row tableRow
	for c := r.FirstChild(); c != nil; c = c.NextSibling() {
		if c.Lines().Len() == 0 {
			break // a cell the row lacks
		}
		seg := c.Lines().At(0)
		row.cells = append(row.cells, span{seg.Start, seg.Stop})
		row.nodes = append(row.nodes, c)
	}
	if len(row.cells) == 0 || len(row.cells) > maxTableCells {
		return row, false
	}
	l := b.d.Line(row.cells[0].start)
	row.line = span{b.d.LineStart(l), b.d.LineEnd(l)}
	return row, strings.IndexByte(b.src[row.line.start:row.line.end], '|') >= 0
}

// cellWidth is the number of characters cell r.cells[k] shows in a <pre>
// table: rendered plain (see builder.plain) by a scratch builder.
func (b *builder) cellWidth(r tableRow, k int) int {
	s := &builder{d: b.d, src: b.src, at: r.cells[k].start, plain: true, cell: true}
	s.inlines(r.nodes[k])
	s.flush(r.cells[k].end)
	var html strings.Builder
	for _, u := range s.units {
		html.WriteString(u.html)
	}
	return utf8.RuneCountInString(visibleText(html.String()))
}

// maxShare bounds the fixed text (padding, column separators, the rule)
// one source character of a table stands for, so that no unit is too long
// for Split's smallest limit; a table that would need more is rendered one
// line per row.
const maxShare = 8

// piece is a part of a <pre> table: a cell, or source (pipes, spaces, the
// delimiter row) that stands for fill.
type piece struct {
	lo, hi int
	fill   string
	cell   bool
	node   ast.Node // the cell's
}

// fits reports whether fill can be spread over src[lo:hi] (see spread).
func (b *builder) fits(lo, hi int, fill string) bool {
	anchors := utf8.RuneCountInString(b.src[lo:hi])
	if anchors == 0 {
		return fill == ""
	}
	n := utf8.RuneCountInString(fill)
	return (n+anchors-1)/anchors <= maxShare
}

// spread renders s (text without tags or characters to escape) in place of
// src[lo:hi], shared evenly among its characters, one unit each: every unit
// of a table stands for some source, so every chunk Split makes of it has a
// source. It reports false, adding nothing, when s does not fit (see fits).
func (b *builder) spread(lo, hi int, s string) bool {
	if !b.fits(lo, hi, s) {
		return false
	}
	out := []rune(s)
	anchors := max(utf8.RuneCountInString(b.src[lo:hi]), 1)
	q, extra := len(out)/anchors, len(out)%anchors
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
// header and the data rows separated by a rule. It reports false, adding
// nothing, when the padding does not fit its source (see spread).
func (b *builder) preTable(rows []tableRow, delim span, widths []int, align []east.Alignment) bool {
	var ps []piece
	rule := ""
	for k, w := range widths {
		if k > 0 {
			rule += "─┼─"
		}
		rule += strings.Repeat("─", w)
	}
	for i, r := range rows {
		if i == 1 {
			ps = append(ps, piece{lo: delim.start, hi: delim.end, fill: rule})
		}
		if i > 0 {
			ps = append(ps, piece{lo: r.line.start - 1, hi: r.line.start, fill: "\n"})
		}
		ps = b.preRow(ps, r, widths, align)
	}
	for _, p := range ps {
		if !p.cell && !b.fits(p.lo, p.hi, p.fill) {
			return false
		}
	}
	b.openTag(rows[0].line.start, rows[0].line.start, "<pre>", "</pre>")
	b.flush(rows[0].line.start)
	for _, p := range ps {
		if !p.cell {
			b.spread(p.lo, p.hi, p.fill)
			continue
		}
		b.plain, b.cell = true, true
		b.inlines(p.node)
		b.flush(p.hi)
		b.plain, b.cell = false, false
	}
	end := rows[len(rows)-1].line.end
	b.closeTag(end, end)
	return true
}

// preRow appends the pieces of one row: its cells, and the source between
// them (pipes, spaces) standing for the column separator and the padding
// that align asks for. Cells a row lacks at its end are left out; cells
// past the header's are not shown.
func (b *builder) preRow(ps []piece, r tableRow, widths []int, align []east.Alignment) []piece {
	at, owed := r.line.start, ""
	for k, c := range r.cells[:min(len(r.cells), len(widths), len(align))] {
		pad := widths[k] - b.cellWidth(r, k)
		before := map[east.Alignment]int{east.AlignRight: pad, east.AlignCenter: pad / 2}[align[k]]
		if k > 0 {
			owed += " │ "
		}
		ps = append(ps, piece{lo: at, hi: c.start, fill: owed + strings.Repeat(" ", before)}, piece{lo: c.start, hi: c.end, cell: true, node: r.nodes[k]})
		owed, at = strings.Repeat(" ", pad-before), c.end
	}
	return append(ps, piece{lo: at, hi: r.line.end})
}

// rowTable renders a table too wide for a phone one line per row, the
// header's bold: "a · b · c".
func (b *builder) rowTable(rows []tableRow, delim span) {
	head := rows[0]
	b.openTag(head.line.start, head.line.start, "<b>", "</b>")
	b.rowLine(head, len(head.cells))
	b.closeTag(head.line.end, head.line.end)
	b.flush(head.line.end + 1)
	b.atom(delim.start, rows[1].line.start, "") // the delimiter line
	for _, r := range rows[1:] {
		b.flush(r.line.start)
		b.rowLine(r, len(head.cells))
	}
}

// rowLine renders the first n cells of r joined by " · ", an empty one as
// "—".
func (b *builder) rowLine(r tableRow, n int) {
	at := r.line.start
	for k, c := range r.cells[:min(len(r.cells), n)] {
		sep := ""
		if k > 0 {
			sep = " · "
		}
		if c.start == c.end {
			sep += "—"
		}
		if !b.spread(at, c.start, sep) { // the '|' and spaces stand for it
			b.atom(at, c.start, "") // an empty first cell without a leading '|'
		}
		b.cell = true
		b.inlines(r.nodes[k])
		b.flush(c.end)
		b.cell = false
		at = c.end
	}
	b.spread(at, r.line.end, "")
}
