package markdown

import (
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// BlockKind is the kind of a Markdown block.
type BlockKind string

// Block kinds recognised by ParseBlocks.
const (
	BlockHeading       BlockKind = "heading"        // ATX (# Title) or setext (Title / ===)
	BlockParagraph     BlockKind = "paragraph"      // also HTML and anything unrecognised
	BlockCode          BlockKind = "code"           // fenced or indented code
	BlockList          BlockKind = "list"           // consecutive items with their continuations
	BlockTable         BlockKind = "table"          // GFM pipe table
	BlockQuote         BlockKind = "blockquote"     // lines starting with ">"
	BlockThematicBreak BlockKind = "thematic_break" // ---, ***, ___
	BlockFrontMatter   BlockKind = "front_matter"   // leading --- ... --- (YAML)
)

// Block is one top-level block of a Markdown document (seed 004's block
// system, flattened: nesting is expressed by Path and Level).
type Block struct {
	Kind BlockKind
	// Level is the heading level, 1–6; 0 for other kinds.
	Level int
	// Heading is the heading's text, without markers; "" for other kinds.
	Heading string
	// Path is the heading path: for a heading, its ancestors' texts and its
	// own joined by "/" ("Intro/Setup"); for other blocks, the path of the
	// section they are in ("" before the first heading). It is seed 004's V1
	// block ID.
	Path string
	// Lang is the info string's first word of a fenced code block.
	Lang string
	// StartLine and EndLine are the 1-based, inclusive line range.
	StartLine, EndLine int
	// Text is the block's lines, joined by "\n", carriage returns removed.
	Text string
}

// ParseBlocks splits doc into blocks, in document order, from goldmark's
// parse (see Doc) of everything after the front matter. Blocks never
// overlap; blank lines between blocks belong to none. Lines inside fenced
// code are never headings. An unclosed fence runs to the end of the
// document. Adjacent lists (bullets changing from "-" to "*") are one
// block; lines goldmark keeps out of the tree (link reference
// definitions) are paragraphs.
func ParseBlocks(doc string) []Block {
	lines := splitLines(doc)
	var blocks []Block
	first, offset := 0, 0
	if fm := frontMatterEnd(lines); fm > 0 {
		blocks = append(blocks, Block{Kind: BlockFrontMatter, StartLine: 0, EndLine: fm})
		first = fm + 1
		offset = skipLines(doc, 0, first)
	}
	blocks = append(blocks, bodyBlocks(doc, lines, offset, first)...)
	var stack []Block // the headings b is under
	for i := range blocks {
		b := &blocks[i]
		b.Text = strings.Join(lines[b.StartLine:b.EndLine+1], "\n")
		if b.Kind == BlockHeading {
			for len(stack) > 0 && stack[len(stack)-1].Level >= b.Level {
				stack = stack[:len(stack)-1]
			}
			stack = append(stack, *b)
		}
		parts := make([]string, len(stack))
		for k, h := range stack {
			parts[k] = h.Heading
		}
		b.Path = strings.Join(parts, "/")
		b.StartLine++
		b.EndLine++
	}
	return blocks
}

// frontMatterEnd returns the 0-based line closing a YAML front matter
// ("---" on the first line, "---" or "..." closing it), or -1.
func frontMatterEnd(lines []string) int {
	if len(lines) < 2 || strings.TrimRight(lines[0], " \t") != "---" {
		return -1
	}
	for j := 1; j < len(lines); j++ {
		if t := strings.TrimRight(lines[j], " \t"); t == "---" || t == "..." {
			return j
		}
	}
	return -1
}

// bodyBlocks returns the blocks of doc from byte offset (line first) on,
// with 0-based line ranges, every non-blank line in one.
func bodyBlocks(doc string, lines []string, offset, first int) []Block {
	d := Parse(doc[offset:])
	var blocks []Block
	covered := first
	bs, nodes := topBlocks(d)
	for i, b := range bs {
		b.StartLine += first
		b.EndLine += first
		// Uncovered non-blank lines before b are a paragraph.
		blocks = appendGap(blocks, lines, covered, b.StartLine)
		if end := listFenceEnd(d, nodes[i], lines, first); end > b.EndLine {
			// The list runs to its fence's closing line; the rest is
			// parsed anew.
			b.EndLine = end
			blocks = addBlock(blocks, b)
			for _, r := range bodyBlocks(doc, lines, skipLines(doc, 0, end+1), end+1) {
				blocks = addBlock(blocks, r)
			}
			return blocks
		}
		blocks = addBlock(blocks, b)
		covered = b.EndLine + 1
	}
	return appendGap(blocks, lines, covered, len(lines))
}

// listFenceEnd returns the line (of lines, where d starts at line first)
// that closes the fence a list ends with when goldmark ended the list's
// item before it ("- a\n  ```\n# h\n  ```": "# h" is code, not a
// heading, as a reader of the list expects), the last line when nothing
// closes it, or -1 when n is no such list.
func listFenceEnd(d *Doc, n ast.Node, lines []string, first int) int {
	if n.Kind() != ast.KindList {
		return -1
	}
	var fence *ast.FencedCodeBlock
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if f, ok := c.(*ast.FencedCodeBlock); ok && entering {
			fence = f
		}
		return ast.WalkContinue, nil
	})
	if fence == nil || fence.Pos() < 0 || d.FenceCloseLine(fence) >= 0 || d.EndLine(fence) < d.EndLine(n) {
		return -1
	}
	src := d.Source[fence.Pos():]
	c, k := src[0], runLen(src, 0, src[0])
	last, next := -1, first+d.EndLine(n)+1
	for i := next; i < len(lines); i++ {
		if t := strings.Trim(lines[i], " \t"); len(t) >= k && strings.Trim(t, string(c)) == "" {
			if i == next {
				return -1 // a fence line right after the list opens a code block
			}
			return i
		}
		if !isBlank(lines[i]) {
			last = i
		}
	}
	return last
}

// skipLines returns the byte offset n lines after offset in doc.
func skipLines(doc string, offset, n int) int {
	for range n {
		k := strings.IndexByte(doc[offset:], '\n')
		if k < 0 {
			return len(doc)
		}
		offset += k + 1
	}
	return offset
}

// addBlock appends b to blocks, or extends the last block with it: a list
// after a list ("-" items, then "*" items) or a paragraph right after a
// paragraph (the text after link reference definitions).
func addBlock(blocks []Block, b Block) []Block {
	if k := len(blocks) - 1; k >= 0 && blocks[k].Kind == b.Kind &&
		(b.Kind == BlockList || b.Kind == BlockParagraph && blocks[k].EndLine+1 == b.StartLine) {
		blocks[k].EndLine = b.EndLine
		return blocks
	}
	return append(blocks, b)
}

// appendGap appends the runs of non-blank lines in lines[from:to] as
// paragraphs (0-based line ranges).
func appendGap(blocks []Block, lines []string, from, to int) []Block {
	for i := from; i < to; i++ {
		if isBlank(lines[i]) {
			continue
		}
		j := i
		for j+1 < to && !isBlank(lines[j+1]) {
			j++
		}
		blocks = addBlock(blocks, Block{Kind: BlockParagraph, StartLine: i, EndLine: j})
		i = j
	}
	return blocks
}

func isBlank(line string) bool { return strings.TrimSpace(line) == "" }

// topBlocks returns the blocks of d's top-level nodes with 0-based line
// ranges, without Text and Path.
func topBlocks(d *Doc) ([]Block, []ast.Node) {
	var out []Block
	var nodes []ast.Node
	for n := d.Root.FirstChild(); n != nil; n = n.NextSibling() {
		start := d.startLine(n)
		if p, ok := n.(*ast.Paragraph); start < 0 || ok && p.Lines().Len() == 0 || n.Kind() == ast.KindLinkReferenceDefinition {
			continue // link reference definitions: a gap, made a paragraph
		}
		b := Block{Kind: BlockParagraph, StartLine: start, EndLine: d.EndLine(n)}
		switch n := n.(type) {
		case *ast.Heading:
			b.Kind, b.Level, b.Heading = BlockHeading, n.Level, d.headingText(n)
			if p := n.Pos(); p >= 0 && d.Source[p] != '#' {
				b.EndLine = min(b.EndLine+1, d.NumLines()-1) // a setext underline
			}
		case *ast.FencedCodeBlock:
			b.Kind = BlockCode
			b.Lang = string(n.Language(d.Source))
		case *ast.CodeBlock:
			b.Kind = BlockCode
		case *ast.List:
			b.Kind = BlockList
		case *east.Table:
			if d.IsTable(n) {
				b.Kind = BlockTable
			}
		case *ast.Blockquote:
			b.Kind = BlockQuote
		case *ast.ThematicBreak:
			b.Kind = BlockThematicBreak
		}
		if k := len(out) - 1; k >= 0 && b.StartLine <= out[k].StartLine {
			continue // goldmark may place a setext heading after a table cut from its lines
		}
		out = append(out, b)
		nodes = append(nodes, n)
	}
	// A block ends before the next one starts (a fence's closing line
	// found by looking ahead may belong to the next block).
	for i := range out {
		if i+1 < len(out) {
			out[i].EndLine = min(out[i].EndLine, out[i+1].StartLine-1)
		}
		out[i].EndLine = max(out[i].EndLine, out[i].StartLine)
	}
	return out, nodes
}

// IsTable reports whether t is a GFM table: goldmark pads a header row
// with fewer cells than the delimiter row, which GFM does not take for a
// table.
func (d *Doc) IsTable(t *east.Table) bool {
	h := t.FirstChild()
	if h == nil {
		return false
	}
	for c := h.FirstChild(); c != nil; c = c.NextSibling() {
		if c.Lines().Len() == 0 {
			return false
		}
	}
	return true
}

// startLine returns the 0-based line where block n starts, or -1.
func (d *Doc) startLine(n ast.Node) int {
	if _, ok := n.(*east.Table); !ok && n.Pos() >= 0 {
		return d.Line(n.Pos())
	}
	// A table's own Pos is its paragraph's, which may have had lines
	// before the header row; its rows' are their lines'.
	start := -1
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering && c != n && c.Pos() >= 0 && (start < 0 || c.Pos() < start) {
			start = c.Pos()
		}
		return ast.WalkContinue, nil
	})
	if start < 0 {
		return -1
	}
	return d.Line(start)
}

// EndLine returns the last 0-based line block n takes: the furthest of its
// nodes' positions and segments, a fence's closing line and a table's
// delimiter row.
func (d *Doc) EndLine(n ast.Node) int {
	end := -1
	seg := func(s text.Segment) {
		if s.Stop > s.Start {
			end = max(end, d.Line(s.Stop-1))
		} else {
			end = max(end, d.Line(s.Start))
		}
	}
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if c.Pos() >= 0 {
			end = max(end, d.Line(c.Pos()))
		}
		switch c := c.(type) {
		case *ast.Text:
			seg(c.Segment)
		case *ast.FencedCodeBlock:
			if l := d.FenceCloseLine(c); l >= 0 {
				end = max(end, l)
			}
		case *east.TableHeader:
			if c.Pos() >= 0 {
				end = max(end, d.Line(c.Pos())+1)
			} else if r := c.FirstChild(); r != nil && r.Pos() >= 0 {
				end = max(end, d.Line(r.Pos())+1)
			}
		}
		if c.Type() == ast.TypeBlock {
			if l := c.Lines(); l.Len() > 0 {
				seg(l.At(l.Len() - 1))
			}
		}
		return ast.WalkContinue, nil
	})
	return min(end, d.NumLines()-1)
}

// headingText is a heading's text as written, its lines trimmed and
// joined by spaces.
func (d *Doc) headingText(h *ast.Heading) string {
	var parts []string
	for i := range h.Lines().Len() {
		s := h.Lines().At(i)
		if t := strings.TrimSpace(string(s.Value(d.Source))); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// Section returns the section of doc under the heading at headingPath: the
// heading line through the last block before the next heading of the same or
// a higher level (trailing blank lines excluded), with its 1-based line
// range. Paths are matched case-insensitively, segment by segment, with
// surrounding spaces ignored ("intro / setup" finds "# Intro" > "## Setup").
// If no heading has exactly that path, the first heading whose path ends with
// it is used, so "Setup" finds "Intro/Setup". ok is false when no heading
// matches or headingPath is empty.
func Section(doc, headingPath string) (text string, startLine, endLine int, ok bool) {
	blocks := ParseBlocks(doc)
	i := findHeading(blocks, headingPath)
	if i < 0 {
		return "", 0, 0, false
	}
	h := blocks[i]
	end := h.EndLine
	for _, b := range blocks[i+1:] {
		if b.Kind == BlockHeading && b.Level <= h.Level {
			break
		}
		end = b.EndLine
	}
	lines := splitLines(doc)
	return strings.Join(lines[h.StartLine-1:end], "\n"), h.StartLine, end, true
}

// findHeading returns the index of the heading block matching path, or -1.
func findHeading(blocks []Block, path string) int {
	want := normalizeHeadingPath(path)
	if want == "" {
		return -1
	}
	suffix := -1
	for i, b := range blocks {
		if b.Kind != BlockHeading {
			continue
		}
		got := normalizeHeadingPath(b.Path)
		if got == want {
			return i
		}
		if suffix < 0 && strings.HasSuffix(got, "/"+want) {
			suffix = i
		}
	}
	return suffix
}

func normalizeHeadingPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = strings.ToLower(strings.Join(strings.Fields(s), " "))
	}
	return strings.Join(segs, "/")
}

// splitLines splits doc into lines without their "\n" or "\r\n"; a final
// newline does not start another line.
func splitLines(doc string) []string {
	if doc == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}
