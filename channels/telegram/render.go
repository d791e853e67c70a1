package telegram

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/util"

	"github.com/switchboard/switchboard/services/markdown"
)

// Render converts Markdown into Telegram HTML (parse_mode=HTML). It walks
// the tree markdown.Parse builds (goldmark, GitHub-flavoured) and keeps the
// source's text as it is, replacing only the markers of what Telegram can
// show:
//
//   - **bold**, __bold__, *italic*, _italic_, ***bold italic***, ~~strike~~
//     (CommonMark's flanking rules, so snake_case and a * b stay literal;
//     marker runs must match exactly and emphasis does not cross lines);
//   - `inline code` and fenced code blocks (an info string's first word that
//     is a plain identifier becomes <pre><code class="language-…">); an
//     unclosed fence runs to the end of its container, as in CommonMark;
//   - [text](url) links whose URL is http, https, tg or mailto; other links
//     keep their brackets and URL as text;
//   - # headings (rendered bold), > quotes (one <blockquote>, nested ones
//     flattened), - * + bullets (rendered "• "), task list items ("☐ ", "☑ ");
//   - tables: a <pre> block of aligned columns when at most maxTableWidth
//     characters wide, else one line per row (see table);
//   - backslash escapes of ASCII punctuation.
//
// Everything else is text as written, with &, < and > escaped; invalid UTF-8
// becomes U+FFFD. The result is always HTML Telegram accepts, its tags
// nested as Telegram's entities may be (the tests check it with ValidHTML);
// it may exceed Telegram's length limit, which Split takes care of.
func Render(markdown string) string {
	var b strings.Builder
	for _, u := range parse(markdown) {
		b.WriteString(u.html)
	}
	return b.String()
}

// unitKind says what a unit of parsed Markdown renders to.
type unitKind uint8

const (
	unitText  unitKind = iota // one rune of source text, rendered escaped
	unitAtom                  // indivisible markup rendered as fixed text: a bullet, an escaped character, a hidden quote marker
	unitOpen                  // an opening tag; its source is the Markdown marker, possibly empty
	unitClose                 // the closing tag of the innermost open unit
)

// A unit is the smallest piece of a rendered message. Units tile the source:
// each starts where the previous ended, the first at 0 and the last ends at
// len(source). Split cuts only between units, so it never cuts inside a tag,
// an entity or a rune.
type unit struct {
	kind       unitKind
	start, end int    // the source bytes the unit stands for
	html       string // what the unit renders to
	closeHTML  string // for unitOpen: the matching closing tag
	blockStart bool   // it starts the first line of a block of the tree: a cut before it is a paragraph break
	runes      int    // utf8.RuneCountInString(html)
	vis        int    // UTF-16 length of the visible text; 0 for tags
}

// content reports whether the unit shows something to the user.
func (u *unit) content() bool {
	return (u.kind == unitText || u.kind == unitAtom) && u.html != ""
}

// Links with longer URLs stay literal text: a reopened <a href> must leave room
// for content in every chunk.
const maxURLLen = 1024

// Languages of fenced code blocks longer than this, or with unusual
// characters, are dropped.
const maxLangLen = 32

// builder turns the tree of a Markdown source into units. Source it passes
// over without a node asking for markup becomes text.
type builder struct {
	d     *markdown.Doc
	src   string
	units []unit
	open  []int // indexes in units of the open units not yet closed
	at    int   // units cover src[:at]
	// raw is set inside code: backslashes are text.
	raw bool
	// quoteEnd is where the blockquote being rendered ends (0: none); the
	// quote markers starting its lines are hidden.
	quoteEnd int
	inLink   bool
	// starts holds where the first lines of the blocks start.
	starts map[int]bool
	// plain is set in a cell of a <pre> table, which can hold no tags:
	// the markers of emphasis, strikethrough and code are hidden, links
	// stay text.
	plain bool
	// cell is set in a table cell, where "\|" is a pipe even in code.
	cell bool
}

// parse splits src into units; see unit.
func parse(src string) []unit {
	b := &builder{d: markdown.Parse(src), src: src, units: make([]unit, 0, len(src)), starts: map[int]bool{}}
	b.blocks(b.d.Root)
	b.flush(len(src))
	for i := range b.units {
		b.units[i].blockStart = b.starts[b.units[i].start]
	}
	return b.units
}

func (b *builder) add(u unit) {
	u.runes = utf8.RuneCountInString(u.html)
	b.units = append(b.units, u)
	b.at = u.end
}

// flush adds src[at:to] as text, one unit per rune, except for backslash
// escapes (outside code) and the quote markers of a blockquote's lines,
// which become atoms.
func (b *builder) flush(to int) {
	src := b.src
	for b.at < to {
		i := b.at
		if src[i] == '\\' && i+1 < to && util.IsPunct(src[i+1]) && (!b.raw || b.cell && src[i+1] == '|') {
			b.atom(i, i+2, textEscaper.Replace(src[i+1:i+2]))
			continue
		}
		if i < b.quoteEnd {
			if m := b.d.QuoteMarker(i); m > i {
				b.atom(i, min(m, to), "")
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(src[i:to])
		u := unit{kind: unitText, start: i, end: i + size, vis: 1}
		if r == utf8.RuneError && size == 1 {
			u.html = "\uFFFD"
		} else {
			u.html, u.vis = textEscaper.Replace(src[i:i+size]), utf16.RuneLen(r)
		}
		b.add(u)
	}
}

// span clamps [start, end) to the source not yet covered, after adding the
// text before it.
func (b *builder) span(start, end int) (int, int) {
	b.flush(start)
	start = max(start, b.at)
	return start, max(end, start)
}

// atom adds src[start:end] as one unit rendered as html, which has no tags.
func (b *builder) atom(start, end int, html string) {
	start, end = b.span(start, end)
	if start == end && html == "" {
		return
	}
	b.add(unit{kind: unitAtom, start: start, end: end, html: html, vis: VisibleLen(html)})
}

// openTag adds an opening tag standing for the marker src[start:end].
func (b *builder) openTag(start, end int, open, close string) {
	if b.plain {
		b.open = append(b.open, -1)
		b.atom(start, end, "")
		return
	}
	start, end = b.span(start, end)
	b.open = append(b.open, len(b.units))
	b.add(unit{kind: unitOpen, start: start, end: end, html: open, closeHTML: close})
}

// closeTag closes the innermost open tag; src[start:end] is its marker.
func (b *builder) closeTag(start, end int) {
	i := b.open[len(b.open)-1]
	b.open = b.open[:len(b.open)-1]
	if i < 0 {
		b.atom(start, end, "")
		return
	}
	start, end = b.span(start, end)
	o := b.units[i]
	b.add(unit{kind: unitClose, start: start, end: end, html: o.closeHTML})
}

// lineEndAt returns where the line holding offset off ends, before its
// line ending.
func (b *builder) lineEndAt(off int) int {
	end := b.d.LineEnd(b.d.Line(off))
	if end > off && b.src[end-1] == '\r' {
		end--
	}
	return end
}

// blocks renders the block children of n.
func (b *builder) blocks(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if p := c.Pos(); p >= 0 {
			b.starts[b.d.LineStart(b.d.Line(p))] = true
		}
		switch c := c.(type) {
		case *ast.Heading:
			b.heading(c)
		case *ast.Blockquote:
			b.quote(c)
		case *ast.List:
			b.blocks(c)
		case *ast.ListItem:
			b.item(c)
		case *ast.FencedCodeBlock:
			b.fence(c)
		case *east.Table:
			b.table(c)
		case *ast.Paragraph, *ast.TextBlock:
			b.inlines(c)
		}
		// Indented code and thematic breaks stay text.
	}
}

// heading renders an ATX heading bold; a setext heading (Title / ===) and
// an empty one stay text.
func (b *builder) heading(h *ast.Heading) {
	pos := h.Pos()
	if h.FirstChild() == nil || h.Lines().Len() == 0 || pos < 0 || b.src[pos] != '#' {
		b.inlines(h)
		return
	}
	seg := h.Lines().At(0)
	b.openTag(pos, seg.Start, "<b>", "</b>")
	b.inlines(h)
	b.closeTag(seg.Stop, b.lineEndAt(seg.Stop))
}

// quote renders a blockquote with content as one <blockquote>, the
// markers goldmark read on its lines hidden; one inside it is flattened
// into it (Telegram cannot nest quotes).
func (b *builder) quote(q *ast.Blockquote) {
	pos := q.Pos()
	if b.quoteEnd > 0 || q.FirstChild() == nil || pos < 0 {
		b.blocks(q)
		return
	}
	end := b.lineEndAt(b.d.LineStart(b.d.EndLine(q)))
	m := max(b.d.QuoteMarker(pos), pos)
	if m >= end || strings.Trim(b.src[m:end], " \t\r\n>") == "" {
		return // markers alone make no quote
	}
	b.openTag(pos, m, "<blockquote>", "</blockquote>")
	b.quoteEnd = end
	b.blocks(q)
	b.flush(end)
	b.closeTag(end, end)
	b.quoteEnd = 0
}

// item renders a bullet list item's marker as "• ", or as its box when
// goldmark read a task's box right after it and a space or the line's end
// follows the box ("- [ ] ", "- [x] ", not "- [ ]x"); ordered items keep
// their numbers.
func (b *builder) item(it *ast.ListItem) {
	src, pos := b.src, it.Pos()
	if l, ok := it.Parent().(*ast.List); ok && !l.IsOrdered() && pos >= 0 && pos+1 < len(src) && (src[pos+1] == ' ' || src[pos+1] == '\t') {
		end, html := pos+2, "• "
		if first := it.FirstChild(); first != nil {
			if box, ok := first.FirstChild().(*east.TaskCheckBox); ok && box.Pos() == end {
				if rest := src[end+3 : b.d.LineEnd(b.d.Line(pos))]; rest == "" || rest[0] == ' ' || rest[0] == '\t' {
					end, html = end+3+min(len(rest), 1), "☐ "
					if box.IsChecked {
						html = "☑ "
					}
				}
			}
		}
		b.atom(pos, end, html)
	}
	b.blocks(it)
}

// fence renders a fenced code block with content as <pre>, its fence lines
// hidden. In a quote it stays text.
func (b *builder) fence(f *ast.FencedCodeBlock) {
	d, src := b.d, b.src
	if b.quoteEnd > 0 || f.Pos() < 0 || f.Lines().Len() == 0 {
		return
	}
	open := d.Line(f.Pos())
	bodyStart := d.LineEnd(open) + 1
	var bodyEnd, markEnd int
	if l := d.FenceCloseLine(f); l >= 0 {
		// The newline before the closing fence belongs to the fence.
		bodyEnd, markEnd = d.LineStart(l)-1, d.LineEnd(l)
	} else {
		last := f.Lines().At(f.Lines().Len() - 1)
		bodyEnd = d.LineEnd(d.Line(last.Start))
		markEnd = bodyEnd
		if bodyEnd == len(src)-1 { // unclosed: the final newline belongs to it
			markEnd = len(src)
		}
	}
	if bodyEnd <= bodyStart {
		return
	}
	openHTML, closeHTML := "<pre>", "</pre>"
	if lang := language(string(f.Language(d.Source))); lang != "" {
		openHTML, closeHTML = `<pre><code class="language-`+lang+`">`, "</code></pre>"
	}
	b.openTag(d.LineStart(open), bodyStart, openHTML, closeHTML)
	b.raw = true
	b.flush(bodyEnd)
	b.raw = false
	b.closeTag(bodyEnd, markEnd)
}

// langChars are the characters of a plain identifier naming a language.
const langChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+#.-"

// language returns lang, goldmark's language of a fence (its info
// string's first word), or "" when it is not a plain identifier.
func language(lang string) string {
	if len(lang) > maxLangLen || strings.Trim(lang, langChars) != "" {
		return ""
	}
	return lang
}

// inlines renders the inline children of n.
func (b *builder) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Emphasis:
			b.emphasis(c)
		case *east.Strikethrough:
			b.strike(c)
		case *ast.CodeSpan:
			b.codeSpan(c)
		case *ast.Link:
			b.link(c, c.Destination)
		default:
			// Text, raw HTML, autolinks, images' alt text: as written.
			b.inlines(c)
		}
	}
}

// start returns where inline node n starts in the source, or -1.
func (b *builder) start(n ast.Node) int {
	switch n := n.(type) {
	case nil:
		return -1
	case *ast.Text:
		return n.Segment.Start
	case *ast.Emphasis:
		if s := b.start(n.FirstChild()); s >= n.Level {
			return s - n.Level
		}
		return -1
	case *east.Strikethrough:
		s := b.start(n.FirstChild())
		for k := 0; k < 2 && s > 0 && b.src[s-1] == '~'; k++ {
			s--
		}
		return s
	case *ast.AutoLink:
		if p := n.PreviousSibling(); p != nil {
			return b.end(p)
		}
		return -1
	}
	return n.Pos()
}

// end returns where inline node n ends in the source, or -1.
func (b *builder) end(n ast.Node) int {
	switch n := n.(type) {
	case nil:
		return -1
	case *ast.Text:
		return n.Segment.Stop
	case *ast.Emphasis:
		if e := b.end(n.LastChild()); e >= 0 {
			return e + n.Level
		}
		return -1
	case *east.Strikethrough:
		e := b.end(n.LastChild())
		for k := 0; k < 2 && e >= 0 && e < len(b.src) && b.src[e] == '~'; k++ {
			e++
		}
		return e
	case *ast.CodeSpan:
		_, close, k := b.d.CodeSpanMarks(n)
		if close < 0 {
			return -1
		}
		return close + k
	case *ast.Link, *ast.Image:
		if s, ok := b.d.Inline(n); ok {
			return s.End
		}
		return -1
	case *ast.RawHTML:
		if n.Segments.Len() > 0 {
			return n.Segments.At(n.Segments.Len() - 1).Stop
		}
	case *east.TaskCheckBox:
		return n.Pos() + 3
	}
	if next := n.NextSibling(); next != nil {
		return b.start(next)
	}
	return -1
}

// emphasis renders emphasis as <b>, <i> or both where its markers are runs
// that match exactly (1, 2 or 3 characters, the same on both sides) on one
// line; otherwise its markers stay text. Nested emphasis sharing its markers
// ("***x***", "**_x_**") is rendered with it.
func (b *builder) emphasis(e *ast.Emphasis) {
	inner := e
	for {
		c, ok := inner.FirstChild().(*ast.Emphasis)
		if !ok || c.NextSibling() != nil {
			break
		}
		inner = c
	}
	cs, ce := b.start(inner.FirstChild()), b.end(inner.LastChild())
	os, oe := b.start(e), b.end(e)
	runs, ok := b.markerRuns(os, cs, ce, oe)
	if !ok {
		b.inlines(e)
		return
	}
	var tags []string // outermost first
	for _, n := range runs {
		tags = append(tags, map[int][]string{1: {"i"}, 2: {"b"}, 3: {"b", "i"}}[n]...)
	}
	width := map[string]int{"b": 2, "i": 1} // the markers a tag stands for
	at := os
	for _, t := range tags {
		b.openTag(at, at+width[t], "<"+t+">", "</"+t+">")
		at += width[t]
	}
	b.inlines(inner)
	at = ce
	for k := len(tags) - 1; k >= 0; k-- {
		b.closeTag(at, at+width[tags[k]])
		at += width[tags[k]]
	}
}

// markerRuns checks the emphasis markers src[os:cs] and src[ce:oe]: each a
// sequence of runs of one character (at most 3 long) not continued by the
// same character around them, the closer mirroring the opener, and the
// content on one line. It returns the lengths of the opener's runs.
func (b *builder) markerRuns(os, cs, ce, oe int) ([]int, bool) {
	src := b.src
	if os < 0 || cs <= os || ce < cs || oe <= ce || oe > len(src) || oe-ce != cs-os ||
		strings.IndexByte(src[cs:ce], '\n') >= 0 {
		return nil, false
	}
	if os > 0 && src[os-1] == src[os] || src[cs] == src[cs-1] ||
		src[ce-1] == src[ce] || oe < len(src) && src[oe] == src[oe-1] {
		return nil, false
	}
	var runs []int
	at := oe
	for i := os; i < cs; {
		n := runLen(src, i, cs, src[i])
		at -= n
		if n > 3 || runLen(src, at, oe, src[i]) != n {
			return nil, false
		}
		runs = append(runs, n)
		i += n
	}
	return runs, true
}

// strike renders strikethrough written with exactly two tildes as <s>.
func (b *builder) strike(s *east.Strikethrough) {
	os, oe := b.start(s), b.end(s)
	cs, ce := b.start(s.FirstChild()), b.end(s.LastChild())
	if runs, ok := b.markerRuns(os, cs, ce, oe); !ok || len(runs) != 1 || runs[0] != 2 {
		b.inlines(s)
		return
	}
	b.openTag(os, cs, "<s>", "</s>")
	b.inlines(s)
	b.closeTag(ce, oe)
}

// codeSpan renders inline code as <code>, its text as written; in a link,
// which Telegram does not let hold code, it stays text.
func (b *builder) codeSpan(n *ast.CodeSpan) {
	open, close, k := b.d.CodeSpanMarks(n)
	if b.inLink || close < 0 {
		return
	}
	b.openTag(open, open+k, "<code>", "</code>")
	b.raw = true
	b.flush(close)
	b.raw = false
	b.closeTag(close, close+k)
}

// link renders a link with text and an http, https, tg or mailto URL of at
// most maxURLLen bytes as <a href>; other links keep their markers as text.
func (b *builder) link(l *ast.Link, dest []byte) {
	s, ok := b.d.Inline(l)
	url := string(dest)
	if b.inLink || b.plain || l.FirstChild() == nil || !ok || !linkURL(url) {
		b.inlines(l)
		return
	}
	b.openTag(l.Pos(), l.Pos()+1, `<a href="`+attrEscaper.Replace(url)+`">`, "</a>")
	b.inLink = true
	b.inlines(l)
	b.inLink = false
	b.closeTag(s.TextEnd, s.End)
}

// linkURL reports whether url may be a link's: an http, https, tg or mailto
// URL of at most maxURLLen bytes without spaces, control characters or
// angle brackets.
func linkURL(url string) bool {
	if len(url) > maxURLLen || !utf8.ValidString(url) || strings.ContainsFunc(url, func(r rune) bool {
		return r <= ' ' || r == '<' || r == '>' || r == 0x7f
	}) {
		return false
	}
	for _, scheme := range []string{"http://", "https://", "tg://", "mailto:"} {
		if len(url) > len(scheme) && strings.EqualFold(url[:len(scheme)], scheme) {
			return true
		}
	}
	return false
}

// runLen returns how many c characters start at src[i], up to hi.
func runLen(src string, i, hi int, c byte) int {
	n := 0
	for i+n < hi && src[i+n] == c {
		n++
	}
	return n
}
