package markdown

import (
	"strings"
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

// ParseBlocks splits doc into blocks, in document order. Blocks never
// overlap; blank lines between blocks belong to none. Lines inside fenced
// code are never headings. An unclosed fence runs to the end of the document.
// The parser follows CommonMark closely enough for navigation, not for
// rendering: it has no HTML blocks, link reference definitions or nested
// container structure.
func ParseBlocks(doc string) []Block {
	lines := splitLines(doc)
	p := blockParser{lines: lines}
	p.parse()
	return p.blocks
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

type headingEntry struct {
	level int
	text  string
}

type blockParser struct {
	lines  []string
	blocks []Block
	stack  []headingEntry
}

func (p *blockParser) sectionPath() string {
	parts := make([]string, len(p.stack))
	for i, h := range p.stack {
		parts[i] = h.text
	}
	return strings.Join(parts, "/")
}

// emit appends a block covering lines [start, end] (0-based, inclusive).
func (p *blockParser) emit(b Block, start, end int) {
	b.StartLine, b.EndLine = start+1, end+1
	b.Text = strings.Join(p.lines[start:end+1], "\n")
	if b.Kind == BlockHeading {
		for len(p.stack) > 0 && p.stack[len(p.stack)-1].level >= b.Level {
			p.stack = p.stack[:len(p.stack)-1]
		}
		p.stack = append(p.stack, headingEntry{b.Level, b.Heading})
	}
	b.Path = p.sectionPath()
	p.blocks = append(p.blocks, b)
}

func (p *blockParser) parse() {
	lines := p.lines
	n := len(lines)
	i := 0
	if n > 1 && strings.TrimRight(lines[0], " \t") == "---" {
		for j := 1; j < n; j++ {
			if t := strings.TrimRight(lines[j], " \t"); t == "---" || t == "..." {
				p.emit(Block{Kind: BlockFrontMatter}, 0, j)
				i = j + 1
				break
			}
		}
	}
	for i < n {
		line := lines[i]
		if isBlank(line) {
			i++
			continue
		}
		start := i
		if c, fl, ok := fenceOpen(line); ok {
			end := n - 1
			for j := i + 1; j < n; j++ {
				if isFenceClose(lines[j], c, fl) {
					end = j
					break
				}
			}
			info := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), string(c)))
			lang, _, _ := strings.Cut(info, " ")
			p.emit(Block{Kind: BlockCode, Lang: lang}, start, end)
			i = end + 1
			continue
		}
		if level, text, ok := atxHeading(line); ok {
			p.emit(Block{Kind: BlockHeading, Level: level, Heading: text}, i, i)
			i++
			continue
		}
		if isThematicBreak(line) {
			p.emit(Block{Kind: BlockThematicBreak}, i, i)
			i++
			continue
		}
		if isQuote(line) {
			i++
			for i < n && !isBlank(lines[i]) && (isQuote(lines[i]) || !interruptsParagraph(lines[i])) {
				i++
			}
			p.emit(Block{Kind: BlockQuote}, start, i-1)
			continue
		}
		if i+1 < n && isTableHeader(line, lines[i+1]) {
			i += 2
			for i < n && !isBlank(lines[i]) && strings.Contains(lines[i], "|") && !interruptsParagraph(lines[i]) {
				i++
			}
			p.emit(Block{Kind: BlockTable}, start, i-1)
			continue
		}
		if isListItem(line) {
			i = p.listEnd(i)
			p.emit(Block{Kind: BlockList}, start, i-1)
			continue
		}
		if indentWidth(line) >= 4 {
			end := i
			for i < n && (isBlank(lines[i]) || indentWidth(lines[i]) >= 4) {
				if !isBlank(lines[i]) {
					end = i
				}
				i++
			}
			p.emit(Block{Kind: BlockCode}, start, end)
			i = end + 1
			continue
		}
		// Paragraph, possibly a setext heading.
		i++
		for i < n && !isBlank(lines[i]) {
			if level := setextLevel(lines[i]); level > 0 {
				text := make([]string, 0, i-start)
				for _, l := range lines[start:i] {
					text = append(text, strings.TrimSpace(l))
				}
				p.emit(Block{Kind: BlockHeading, Level: level, Heading: strings.Join(text, " ")}, start, i)
				i++
				start = -1
				break
			}
			if interruptsParagraph(lines[i]) || (i+1 < n && isTableHeader(lines[i], lines[i+1])) {
				break
			}
			i++
		}
		if start >= 0 {
			p.emit(Block{Kind: BlockParagraph}, start, i-1)
		}
	}
}

// listEnd returns the index after the list starting at line i: items, their
// indented continuations (fenced code included), lazy continuation lines and
// blank lines followed by more of the list.
func (p *blockParser) listEnd(i int) int {
	lines := p.lines
	n := len(lines)
	i++
	for i < n {
		l := lines[i]
		switch {
		case isBlank(l):
			k := i
			for k < n && isBlank(lines[k]) {
				k++
			}
			if k < n && (isListItem(lines[k]) || indentWidth(lines[k]) >= 2) {
				i = k
				continue
			}
			return i
		case isListItem(l):
			i++
		case indentWidth(l) >= 2:
			if c, fl, ok := fenceOpen(strings.TrimLeft(l, " \t")); ok {
				i++
				for i < n && !isFenceClose(strings.TrimLeft(lines[i], " \t"), c, fl) {
					i++
				}
			}
			i++
		case !interruptsParagraph(l) && !isBlank(lines[i-1]):
			i++ // lazy continuation of the item's paragraph
		default:
			return i
		}
	}
	return min(i, n)
}

func isBlank(line string) bool { return strings.TrimSpace(line) == "" }

// indentWidth returns the leading whitespace width, tabs to multiples of 4.
func indentWidth(line string) int {
	w := 0
	for _, c := range []byte(line) {
		switch c {
		case ' ':
			w++
		case '\t':
			w += 4 - w%4
		default:
			return w
		}
	}
	return w
}

// atxHeading parses "## Title ##" into level 2 and "Title".
func atxHeading(line string) (int, string, bool) {
	if indentWidth(line) > 3 {
		return 0, "", false
	}
	s := strings.TrimLeft(line, " ")
	level := 0
	for level < len(s) && s[level] == '#' {
		level++
	}
	if level == 0 || level > 6 {
		return 0, "", false
	}
	rest := s[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return 0, "", false
	}
	text := strings.TrimSpace(rest)
	// A closing sequence of #s is dropped if it is the whole text or
	// preceded by a space ("# C#" keeps its #).
	if t := strings.TrimRight(text, "#"); t != text {
		if t == "" {
			text = ""
		} else if t[len(t)-1] == ' ' || t[len(t)-1] == '\t' {
			text = strings.TrimSpace(t)
		}
	}
	return level, text, true
}

func isThematicBreak(line string) bool {
	if indentWidth(line) > 3 {
		return false
	}
	var c byte
	count := 0
	for _, b := range []byte(line) {
		switch b {
		case ' ', '\t':
		case '-', '*', '_':
			if c != 0 && b != c {
				return false
			}
			c = b
			count++
		default:
			return false
		}
	}
	return count >= 3
}

// setextLevel returns 1 for a "===" underline, 2 for "---", 0 otherwise.
func setextLevel(line string) int {
	if indentWidth(line) > 3 {
		return 0
	}
	t := strings.TrimSpace(line)
	if t == "" {
		return 0
	}
	switch {
	case strings.Trim(t, "=") == "":
		return 1
	case strings.Trim(t, "-") == "":
		return 2
	}
	return 0
}

func isQuote(line string) bool {
	return indentWidth(line) <= 3 && strings.HasPrefix(strings.TrimLeft(line, " "), ">")
}

// isListItem reports whether line starts a bullet ("- ", "* ", "+ ") or
// ordered ("1. ", "2) ") list item.
func isListItem(line string) bool {
	if indentWidth(line) > 3 || isThematicBreak(line) {
		return false
	}
	s := strings.TrimLeft(line, " \t")
	if s == "" {
		return false
	}
	k := 0
	switch s[0] {
	case '-', '*', '+':
		k = 1
	default:
		for k < len(s) && k < 9 && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == 0 || k >= len(s) || (s[k] != '.' && s[k] != ')') {
			return false
		}
		k++
	}
	return k == len(s) || s[k] == ' ' || s[k] == '\t'
}

// interruptsParagraph reports whether line starts a block that ends a
// paragraph (or a lazy continuation) without a blank line.
func interruptsParagraph(line string) bool {
	if _, _, ok := atxHeading(line); ok {
		return true
	}
	if _, _, ok := fenceOpen(line); ok {
		return true
	}
	return isThematicBreak(line) || isQuote(line) || isListItem(line)
}

// isTableHeader reports whether header and delim start a GFM table: the
// delimiter row has cells like "---", ":--:" and as many cells as the header.
func isTableHeader(header, delim string) bool {
	if !strings.Contains(header, "|") || indentWidth(header) > 3 || indentWidth(delim) > 3 {
		return false
	}
	cells := tableCells(delim)
	if len(cells) == 0 || (len(cells) == 1 && !strings.Contains(delim, "|")) {
		return false
	}
	for _, c := range cells {
		c = strings.TrimSuffix(strings.TrimPrefix(c, ":"), ":")
		if c == "" || strings.Trim(c, "-") != "" {
			return false
		}
	}
	return len(tableCells(header)) == len(cells)
}

func tableCells(row string) []string {
	t := strings.TrimSpace(row)
	t = strings.TrimPrefix(t, "|")
	t = strings.TrimSuffix(t, "|")
	cells := strings.Split(t, "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
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
