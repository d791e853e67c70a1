package telegram

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services/markdown"
)

// Render converts the Markdown subset that LLMs commonly write into Telegram
// HTML (parse_mode=HTML). It understands:
//
//   - **bold**, __bold__, *italic*, _italic_, ***bold italic***, ~~strike~~,
//     with CommonMark's flanking rules, so snake_case and a * b stay literal;
//   - `inline code` and fenced code blocks (``` or ~~~, with an optional
//     language that becomes <pre><code class="language-…">); an unclosed fence
//     runs to the end of the text, as in CommonMark;
//   - [text](url) links whose URL is http, https, tg or mailto; other links
//     stay literal text;
//   - # headings (rendered bold), > quotes (<blockquote>), and -, *, + bullets
//     (rendered "• "), task list items ("- [ ]", "- [x]": rendered "☐ ", "☑ ");
//   - tables (a header row, a |---| delimiter row, data rows): a <pre> block
//     of aligned columns when at most maxTableWidth characters wide, else
//     one line per row (see table);
//   - backslash escapes of ASCII punctuation.
//
// Everything else is text, with &, < and > escaped; invalid UTF-8 becomes
// U+FFFD. Markers without a partner stay literal. Emphasis does not cross
// lines. The result always passes ValidHTML; it may exceed Telegram's length
// limit, which Split takes care of.
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
	block      bool   // for unitOpen and unitClose: a block construct (pre, blockquote)
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

// builder turns Markdown source into units.
type builder struct {
	src   string
	units []unit
	open  []int // indexes in units of the open units not yet closed
}

// parse splits src into units; see unit.
func parse(src string) []unit {
	b := &builder{src: src, units: make([]unit, 0, len(src))}
	for i := 0; i < len(src); {
		eol := lineEnd(src, i)
		if next, ok := b.fence(i, eol); ok {
			i = next
		} else if next, ok := b.quote(i); ok {
			i = next
		} else if next, ok := b.table(i); ok {
			i = next
		} else {
			b.lineBody(i, eol)
			i = eol
		}
		if i < len(src) { // src[i] == '\n'
			b.text(i, i+1)
			i++
		}
	}
	return b.units
}

// lineEnd returns the index of the '\n' ending the line that starts at i, or
// len(src).
func lineEnd(src string, i int) int {
	if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(src)
}

func (b *builder) add(u unit) {
	u.runes = utf8.RuneCountInString(u.html)
	b.units = append(b.units, u)
}

// text adds src[start:end] as text units, one per rune.
func (b *builder) text(start, end int) {
	for i := start; i < end; {
		r, size := utf8.DecodeRuneInString(b.src[i:end])
		u := unit{kind: unitText, start: i, end: i + size, vis: 1}
		switch {
		case r == '&':
			u.html = "&amp;"
		case r == '<':
			u.html = "&lt;"
		case r == '>':
			u.html = "&gt;"
		case r == utf8.RuneError && size == 1:
			u.html = "\uFFFD"
		default:
			u.html = b.src[i : i+size]
			u.vis = utf16.RuneLen(r)
		}
		b.add(u)
		i += size
	}
}

// atom adds src[start:end] as one unit rendered as html, which has no tags.
func (b *builder) atom(start, end int, html string) {
	b.add(unit{kind: unitAtom, start: start, end: end, html: html, vis: VisibleLen(html)})
}

// openTag adds an opening tag standing for the marker src[start:end].
func (b *builder) openTag(start, end int, open, close string, block bool) {
	b.open = append(b.open, len(b.units))
	b.add(unit{kind: unitOpen, start: start, end: end, html: open, closeHTML: close, block: block})
}

// closeTag closes the innermost open tag; src[start:end] is its marker.
func (b *builder) closeTag(start, end int) {
	o := b.units[b.open[len(b.open)-1]]
	b.open = b.open[:len(b.open)-1]
	b.add(unit{kind: unitClose, start: start, end: end, html: o.closeHTML, block: o.block})
}

// fence renders a fenced code block whose opening line is src[start:eol] and
// returns the end of its closing line. It reports false, adding nothing, when
// the line does not open a code block with at least one character of content.
func (b *builder) fence(start, eol int) (int, bool) {
	src := b.src
	rest := strings.TrimLeft(src[start:eol], " \t")
	fc, n, ok := markdown.FenceOpen(rest)
	if !ok || eol == len(src) {
		return 0, false
	}
	info := strings.TrimSpace(rest[n:])
	bodyStart := eol + 1
	bodyEnd, markEnd := len(src), len(src) // unclosed: runs to the end
	if strings.HasSuffix(src, "\n") {
		bodyEnd--
	}
	for j := bodyStart; j < len(src); {
		e := lineEnd(src, j)
		if markdown.IsFenceClose(src[j:e], fc, n) {
			// The newline before the closing fence belongs to the fence.
			bodyEnd, markEnd = j-1, e
			break
		}
		j = e + 1
	}
	if bodyEnd <= bodyStart {
		return 0, false
	}
	open, close := "<pre>", "</pre>"
	if lang := language(info); lang != "" {
		open, close = `<pre><code class="language-`+lang+`">`, "</code></pre>"
	}
	b.openTag(start, bodyStart, open, close, true)
	b.text(bodyStart, bodyEnd)
	b.closeTag(bodyEnd, markEnd)
	return markEnd, true
}

// language returns the language named by a fence's info string, or "" when
// there is none or it is not a plain identifier.
func language(info string) string {
	lang, _, _ := strings.Cut(info, " ")
	lang, _, _ = strings.Cut(lang, "\t")
	if len(lang) > maxLangLen {
		return ""
	}
	for i := 0; i < len(lang); i++ {
		c := lang[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_+#.-", c) >= 0) {
			return ""
		}
	}
	return lang
}

// quoteMarker returns the length of the quote marker that starts line ("> ",
// ">", "  >> "), or -1. Telegram cannot nest quotes, so ">>" is one level.
func quoteMarker(line string) int {
	i := 0
	for i < len(line) && i < 3 && line[i] == ' ' {
		i++
	}
	if i == len(line) || line[i] != '>' {
		return -1
	}
	for i < len(line) && line[i] == '>' {
		i++
		if i < len(line) && line[i] == ' ' {
			i++
		}
	}
	return i
}

// quote renders the run of quote lines starting at start as one blockquote
// (as plain lines if they are all empty) and returns the end of its last
// line. It reports false, adding nothing, when start is not a quote line.
func (b *builder) quote(start int) (int, bool) {
	type quoteLine struct{ start, body, end int }
	var lines []quoteLine
	hasBody := false
	for j := start; ; j++ {
		e := lineEnd(b.src, j)
		m := quoteMarker(b.src[j:e])
		if m < 0 {
			break
		}
		lines = append(lines, quoteLine{j, j + m, e})
		hasBody = hasBody || j+m < e
		if e == len(b.src) {
			break
		}
		j = e
	}
	if len(lines) == 0 {
		return 0, false
	}
	if !hasBody {
		// Markers alone make no quote; render the lines as text now rather
		// than rescanning them from each line.
		for k, l := range lines {
			if k > 0 {
				b.text(l.start-1, l.start)
			}
			b.lineBody(l.start, l.end)
		}
		return lines[len(lines)-1].end, true
	}
	for k, l := range lines {
		if k == 0 {
			b.openTag(l.start, l.body, "<blockquote>", "</blockquote>", true)
		} else {
			b.text(l.start-1, l.start)
			b.atom(l.start, l.body, "")
		}
		b.lineBody(l.body, l.end)
	}
	end := lines[len(lines)-1].end
	b.closeTag(end, end)
	return end, true
}

// lineBody renders one line (without its newline): a heading, a bullet or
// plain inline text.
func (b *builder) lineBody(start, end int) {
	line := b.src[start:end]
	if h := headingMarker(line); h > 0 {
		b.openTag(start, start+h, "<b>", "</b>", false)
		b.inline(start+h, end, 0)
		b.closeTag(end, end)
		return
	}
	indent := len(line) - len(strings.TrimLeft(line, " \t"))
	if rest := line[indent:]; len(rest) >= 2 && strings.IndexByte("-*+", rest[0]) >= 0 && (rest[1] == ' ' || rest[1] == '\t') {
		b.text(start, start+indent)
		if box, n := taskBox(rest[2:]); n > 0 {
			// A task list item: its box instead of the bullet.
			b.atom(start+indent, start+indent+2+n, box)
			b.inline(start+indent+2+n, end, 0)
			return
		}
		b.atom(start+indent, start+indent+2, "• ")
		b.inline(start+indent+2, end, 0)
		return
	}
	b.inline(start, end, 0)
}

// taskBox reads the "[ ] " or "[x] " that starts a task list item's text
// and returns the box it shows as and the marker's length (0: none).
func taskBox(s string) (string, int) {
	if len(s) < 3 || s[0] != '[' || s[2] != ']' || (len(s) > 3 && s[3] != ' ' && s[3] != '\t') {
		return "", 0
	}
	n := min(len(s), 4)
	switch s[1] {
	case ' ':
		return "☐ ", n
	case 'x', 'X':
		return "☑ ", n
	}
	return "", 0
}

// headingMarker returns the length of the "## " marker of a heading line with
// a non-blank title, or 0.
func headingMarker(line string) int {
	n := runLen(line, 0, len(line), '#')
	if n == 0 || n > 6 || n == len(line) || (line[n] != ' ' && line[n] != '\t') {
		return 0
	}
	title := strings.TrimLeft(line[n:], " \t")
	if strings.TrimSpace(title) == "" {
		return 0
	}
	return len(line) - len(title)
}

// deny is a set of inline constructs not allowed in the current span: the
// span's own kind, so that tags do not nest in themselves, and code and links
// inside links, which Telegram rejects.
type deny uint8

const (
	denyBold deny = 1 << iota
	denyItalic
	denyStrike
	denyLink
	denyCode
)

// inline renders src[lo:hi], a part of one line.
func (b *builder) inline(lo, hi int, d deny) {
	src := b.src
	pending := lo // start of literal text not yet added
	// noCloser[k] is set once a search for a closer of emphasis kind k
	// failed: later searches would scan a part of the same text, so they are
	// skipped, which keeps a line full of lone markers linear.
	var noCloser [numEmphasisKinds]bool
	for i := lo; i < hi; {
		switch c := src[i]; c {
		case '\\':
			if i+1 < hi && isASCIIPunct(src[i+1]) {
				b.text(pending, i)
				b.atom(i, i+2, escapeByte(src[i+1]))
				i += 2
				pending = i
				continue
			}
		case '`':
			n := runLen(src, i, hi, '`')
			if d&denyCode == 0 {
				if k := codeClose(src, i+n, hi, n); k > i+n {
					b.text(pending, i)
					b.openTag(i, i+n, "<code>", "</code>", false)
					b.text(i+n, k)
					b.closeTag(k, k+n)
					i = k + n
					pending = i
					continue
				}
			}
			i += n
			continue
		case '[':
			if d&denyLink == 0 {
				if l, ok := parseLink(src, i, hi); ok {
					b.text(pending, i)
					b.openTag(i, i+1, `<a href="`+attrEscaper.Replace(l.url)+`">`, "</a>", false)
					b.inline(i+1, l.textEnd, d|denyLink|denyCode)
					b.closeTag(l.textEnd, l.end)
					i = l.end
					pending = i
					continue
				}
			}
		case '*', '_', '~':
			n := runLen(src, i, hi, c)
			if tags, own, kind := emphasisTags(c, n); tags != nil && d&own == 0 && !noCloser[kind] && canOpen(src, i, n, lo, hi) {
				k := b.closer(i+n, lo, hi, c, n, d)
				noCloser[kind] = k < 0
				if k >= 0 {
					b.text(pending, i)
					at := i
					for _, t := range tags {
						b.openTag(at, at+t.width, "<"+t.name+">", "</"+t.name+">", false)
						at += t.width
					}
					b.inline(i+n, k, d|own)
					at = k
					for j := len(tags) - 1; j >= 0; j-- {
						b.closeTag(at, at+tags[j].width)
						at += tags[j].width
					}
					i = k + n
					pending = i
					continue
				}
			}
			i += n
			continue
		}
		i++
	}
	b.text(pending, hi)
}

// emphasisTag is one tag an emphasis marker stands for, and how many marker
// characters it takes.
type emphasisTag struct {
	name  string
	width int
}

// numEmphasisKinds counts the emphasis markers: ~~ and 1 to 3 of * or _.
const numEmphasisKinds = 7

// emphasisTags returns the tags a run of n c characters opens, the deny
// flags for its content, and an index in [0, numEmphasisKinds) for the kind
// of marker; nil if the run is not an emphasis marker.
func emphasisTags(c byte, n int) ([]emphasisTag, deny, int) {
	kind := n
	if c == '_' {
		kind += 3
	}
	switch {
	case c == '~' && n == 2:
		return []emphasisTag{{"s", 2}}, denyStrike, 0
	case c == '~':
		return nil, 0, 0
	case n == 1:
		return []emphasisTag{{"i", 1}}, denyItalic, kind
	case n == 2:
		return []emphasisTag{{"b", 2}}, denyBold, kind
	case n == 3:
		return []emphasisTag{{"b", 2}, {"i", 1}}, denyBold | denyItalic, kind
	}
	return nil, 0, 0
}

// closer finds the run of exactly n c characters in src[from:hi] that closes
// the emphasis opened just before from, skipping escapes, code spans and links
// the way inline would; -1 if there is none. lo is where the line part starts.
func (b *builder) closer(from, lo, hi int, c byte, n int, d deny) int {
	src := b.src
	for j := from; j < hi; {
		switch ch := src[j]; {
		case ch == '\\' && j+1 < hi && isASCIIPunct(src[j+1]):
			j += 2
			continue
		case ch == '`' && d&denyCode == 0:
			m := runLen(src, j, hi, '`')
			if k := codeClose(src, j+m, hi, m); k > j+m {
				j = k + m
			} else {
				j += m
			}
			continue
		case ch == '[' && d&denyLink == 0:
			if l, ok := parseLink(src, j, hi); ok {
				j = l.end
				continue
			}
		case ch == c:
			m := runLen(src, j, hi, c)
			if m == n && j > from && canClose(src, j, n, lo, hi) {
				return j
			}
			j += m
			continue
		}
		j++
	}
	return -1
}

// flanking applies CommonMark's left- and right-flanking rules to the
// delimiter run src[i:i+n]; the edges of src[lo:hi] count as whitespace.
func flanking(src string, i, n, lo, hi int) (left, right bool, before, after rune) {
	before, after = ' ', ' '
	if i > lo {
		before, _ = utf8.DecodeLastRuneInString(src[lo:i])
	}
	if i+n < hi {
		after, _ = utf8.DecodeRuneInString(src[i+n : hi])
	}
	left = !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
	right = !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
	return left, right, before, after
}

// canOpen reports whether the run src[i:i+n] may open emphasis. An underscore
// inside a word (snake_case) may not.
func canOpen(src string, i, n, lo, hi int) bool {
	left, right, before, _ := flanking(src, i, n, lo, hi)
	if src[i] == '_' {
		return left && (!right || isPunct(before))
	}
	return left
}

// canClose reports whether the run src[i:i+n] may close emphasis.
func canClose(src string, i, n, lo, hi int) bool {
	left, right, _, after := flanking(src, i, n, lo, hi)
	if src[i] == '_' {
		return right && (!left || isPunct(after))
	}
	return right
}

func isPunct(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }

func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && (unicode.IsPunct(rune(c)) || unicode.IsSymbol(rune(c)))
}

// escapeByte renders one ASCII character as HTML text.
func escapeByte(c byte) string {
	switch c {
	case '&':
		return "&amp;"
	case '<':
		return "&lt;"
	case '>':
		return "&gt;"
	}
	return string(rune(c))
}

// runLen returns how many c characters start at src[i], up to hi.
func runLen(src string, i, hi int, c byte) int {
	n := 0
	for i+n < hi && src[i+n] == c {
		n++
	}
	return n
}

// codeClose returns the start of the first run of exactly n backticks in
// src[from:hi], or -1.
func codeClose(src string, from, hi, n int) int {
	for j := from; j < hi; {
		if src[j] != '`' {
			j++
			continue
		}
		m := runLen(src, j, hi, '`')
		if m == n {
			return j
		}
		j += m
	}
	return -1
}

// link is an inline link [text](url) found by parseLink.
type link struct {
	textEnd int // index of the ']'
	end     int // index just past the ')'
	url     string
}

// parseLink parses the link starting at src[i] == '[' within src[:hi]. The
// text must be non-empty and free of brackets, the URL free of whitespace and
// control characters (balanced parentheses are allowed), at most maxURLLen
// bytes, and of an allowed scheme.
func parseLink(src string, i, hi int) (link, bool) {
	j := i + 1
	for ; j < hi && src[j] != ']'; j++ {
		switch src[j] {
		case '\\':
			j++
		case '[':
			return link{}, false
		}
	}
	if j >= hi || j == i+1 || j+1 >= hi || src[j+1] != '(' {
		return link{}, false
	}
	textEnd := j
	depth := 0
	k := j + 2
	// Bounding the scan by maxURLLen keeps a line full of "[a](" linear.
	for hi = min(hi, k+maxURLLen+1); k < hi; k++ {
		c := src[k]
		if c <= ' ' || c == 0x7f || c == '<' || c == '>' {
			return link{}, false
		}
		if c == '(' {
			depth++
		} else if c == ')' {
			if depth == 0 {
				break
			}
			depth--
		}
	}
	if k >= hi {
		return link{}, false
	}
	url := src[textEnd+2 : k]
	if len(url) > maxURLLen || !utf8.ValidString(url) || !allowedScheme(url) {
		return link{}, false
	}
	return link{textEnd: textEnd, end: k + 1, url: url}, true
}

// allowedScheme reports whether url is an http, https, tg or mailto URL.
func allowedScheme(url string) bool {
	for _, scheme := range []string{"http://", "https://", "tg://", "mailto:"} {
		if len(url) > len(scheme) && strings.EqualFold(url[:len(scheme)], scheme) {
			return true
		}
	}
	return false
}
