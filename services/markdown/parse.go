package markdown

import (
	"reflect"
	"sort"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Doc is a Markdown text parsed by goldmark: GitHub-flavoured (tables,
// strikethrough, task lists, autolinks) and without HTML blocks (a "<div>"
// line is a paragraph with inline raw HTML, so it cannot take the lines
// after it along). It is the one parse the block and reference operations
// of this package and the renderers of the channels (Telegram, terminal,
// web page) work over.
type Doc struct {
	// Source is the parsed text.
	Source []byte
	// Root is goldmark's document node; its nodes' segments and Pos are
	// byte offsets in Source.
	Root ast.Node
	// lineStarts[i] is the byte offset where line i (0-based) starts.
	lineStarts []int
	// inline holds where the code spans, links and images start and end,
	// as goldmark's parsers read them.
	inline map[ast.Node]InlineSpan
	// fenceClose maps each closed fenced code block to the byte offset
	// where its closing fence's line starts.
	fenceClose map[ast.Node]int
	// quoteMarks are the blockquote markers goldmark read, in source
	// order: [Start, End) is a line's indentation, ">" and the space after
	// it (TextEnd unused).
	quoteMarks []InlineSpan
}

// InlineSpan is the source of a code span, link or image: [Start, End),
// and for a link or image, TextEnd, where the "]" closing its text is.
type InlineSpan struct{ Start, TextEnd, End int }

// inlineKey and fenceKey hold a parse's maps of InlineSpans and closing
// fences in its parser.Context.
var inlineKey, fenceKey, quoteKey = parser.NewContextKey(), parser.NewContextKey(), parser.NewContextKey()

// contextMap returns the map under key in pc, making it when there is none.
func contextMap[V any](pc parser.Context, key parser.ContextKey) map[ast.Node]V {
	m, _ := pc.Get(key).(map[ast.Node]V)
	if m == nil {
		m = map[ast.Node]V{}
		pc.Set(key, m)
	}
	return m
}

// fenceRecorder is goldmark's fenced code block parser, recording where
// the closing fence of each block it closes is.
type fenceRecorder struct{ parser.BlockParser }

func (p fenceRecorder) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	_, seg := reader.Position()
	st := p.BlockParser.Continue(node, reader, pc)
	if st == parser.Close { // only at its closing fence
		contextMap[int](pc, fenceKey)[node] = seg.Start
	}
	return st
}

// quoteRecorder is goldmark's blockquote parser, recording the marker it
// reads on each line: what it advances the reader over.
type quoteRecorder struct{ parser.BlockParser }

func (p quoteRecorder) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	defer recordQuoteMark(pc, reader)()
	return p.BlockParser.Open(parent, reader, pc)
}

func (p quoteRecorder) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	defer recordQuoteMark(pc, reader)()
	return p.BlockParser.Continue(node, reader, pc)
}

func recordQuoteMark(pc parser.Context, reader text.Reader) func() {
	_, before := reader.Position()
	return func() {
		if _, after := reader.Position(); after.Start > before.Start {
			marks, _ := pc.Get(quoteKey).([]InlineSpan)
			pc.Set(quoteKey, append(marks, InlineSpan{Start: before.Start, End: after.Start}))
		}
	}
}

// QuoteMarker returns where the blockquote marker goldmark read that holds
// byte offset off (a line's indentation, ">" and the space after it) ends,
// or -1 when off is in none.
func (d *Doc) QuoteMarker(off int) int {
	m := d.quoteMarks
	i := sort.Search(len(m), func(i int) bool { return m[i].End > off })
	if i < len(m) && m[i].Start <= off {
		return m[i].End
	}
	return -1
}

// recorder is one of goldmark's inline parsers, recording where each code
// span, link or image it returns starts and ends: goldmark's tree keeps the
// segments of text, not where the markers around them are.
type recorder struct{ parser.InlineParser }

func (p recorder) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	_, before := block.Position()
	n := p.InlineParser.Parse(parent, block, pc)
	if n != nil && (n.Kind() == ast.KindCodeSpan || n.Kind() == ast.KindLink || n.Kind() == ast.KindImage) {
		_, after := block.Position()
		contextMap[InlineSpan](pc, inlineKey)[n] = InlineSpan{Start: before.Start, TextEnd: before.Start, End: after.Start}
	}
	return n
}

// CloseBlock lets the link parser drop the brackets left open in a block.
func (p recorder) CloseBlock(parent ast.Node, block text.Reader, pc parser.Context) {
	if c, ok := p.InlineParser.(parser.CloseBlocker); ok {
		c.CloseBlock(parent, block, pc)
	}
}

// Inline returns where the code span, link or image n is in the source.
func (d *Doc) Inline(n ast.Node) (InlineSpan, bool) {
	s, ok := d.inline[n]
	if ok && n.Kind() != ast.KindCodeSpan {
		s.Start = n.Pos() // the link parser reads a link at its "]"
	}
	return s, ok
}

// parserOnce is the shared goldmark parser; goldmark parsers are safe for
// concurrent use.
var parserOnce = sync.OnceValue(func() parser.Parser {
	htmlBlock, fence, quote := reflect.TypeOf(parser.NewHTMLBlockParser()), reflect.TypeOf(parser.NewFencedCodeBlockParser()), reflect.TypeOf(parser.NewBlockquoteParser())
	var blocks []util.PrioritizedValue
	for _, v := range parser.DefaultBlockParsers() {
		switch reflect.TypeOf(v.Value) {
		case htmlBlock:
		case fence:
			blocks = append(blocks, util.Prioritized(fenceRecorder{v.Value.(parser.BlockParser)}, v.Priority))
		case quote:
			blocks = append(blocks, util.Prioritized(quoteRecorder{v.Value.(parser.BlockParser)}, v.Priority))
		default:
			blocks = append(blocks, v)
		}
	}
	link, code := reflect.TypeOf(parser.NewLinkParser()), reflect.TypeOf(parser.NewCodeSpanParser())
	inlines := parser.DefaultInlineParsers()
	for i, v := range inlines {
		switch reflect.TypeOf(v.Value) {
		case link:
			inlines[i].Value = recorder{boundedLinkParser{v.Value.(parser.InlineParser)}}
		case code:
			inlines[i].Value = recorder{v.Value.(parser.InlineParser)}
		}
	}
	base := parser.NewParser(parser.WithBlockParsers(blocks...),
		parser.WithInlineParsers(inlines...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...))
	// The GFM extension adds its parsers to base.
	return goldmark.New(goldmark.WithParser(base), goldmark.WithExtensions(extension.GFM)).Parser()
})

// maxLinkTail is how much of a line after a link's "]" (or "[", "!")
// goldmark's link parser reads: it scans a destination to the end of the
// line, which made a line full of "[a](" quadratic. A link whose
// destination and title are longer stays text.
const maxLinkTail = 2048

// boundedLinkParser is goldmark's link parser reading at most maxLinkTail
// bytes of a line.
type boundedLinkParser struct{ parser.InlineParser }

func (p boundedLinkParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	return p.InlineParser.Parse(parent, boundedReader{block}, pc)
}

func (p boundedLinkParser) CloseBlock(parent ast.Node, block text.Reader, pc parser.Context) {
	p.InlineParser.(parser.CloseBlocker).CloseBlock(parent, block, pc)
}

// boundedReader shows at most maxLinkTail bytes of each line.
type boundedReader struct{ text.Reader }

func (r boundedReader) PeekLine() ([]byte, text.Segment) {
	line, seg := r.Reader.PeekLine()
	if len(line) > maxLinkTail && seg.Padding == 0 {
		line, seg.Stop = line[:maxLinkTail], seg.Start+maxLinkTail
	}
	return line, seg
}

// Parse parses src.
func Parse(src string) *Doc {
	b := []byte(src)
	pc := parser.NewContext()
	d := &Doc{Source: b, Root: parserOnce().Parse(text.NewReader(b), parser.WithContext(pc))}
	d.inline, _ = pc.Get(inlineKey).(map[ast.Node]InlineSpan)
	d.fenceClose, _ = pc.Get(fenceKey).(map[ast.Node]int)
	d.quoteMarks, _ = pc.Get(quoteKey).([]InlineSpan)
	sort.Slice(d.quoteMarks, func(i, j int) bool { return d.quoteMarks[i].Start < d.quoteMarks[j].Start })
	d.lineStarts = append(d.lineStarts, 0)
	for i, c := range b {
		if c == '\n' && i+1 < len(b) {
			d.lineStarts = append(d.lineStarts, i+1)
		}
	}
	return d
}

// Line returns the 0-based line of byte offset off.
func (d *Doc) Line(off int) int {
	return sort.Search(len(d.lineStarts), func(i int) bool { return d.lineStarts[i] > off }) - 1
}

// LineStart returns the byte offset where 0-based line i starts.
func (d *Doc) LineStart(i int) int { return d.lineStarts[i] }

// LineEnd returns the byte offset where 0-based line i ends: its "\n", or
// the end of the source.
func (d *Doc) LineEnd(i int) int {
	if i+1 < len(d.lineStarts) {
		return d.lineStarts[i+1] - 1
	}
	if n := len(d.Source); n > 0 && d.Source[n-1] == '\n' {
		return n - 1
	}
	return len(d.Source)
}

// NumLines is the number of lines; a final newline does not start one.
func (d *Doc) NumLines() int {
	if len(d.Source) == 0 {
		return 0
	}
	return len(d.lineStarts)
}

// FenceCloseLine returns the 0-based line of the closing fence of n, or -1
// when it has none.
func (d *Doc) FenceCloseLine(n *ast.FencedCodeBlock) int {
	if off, ok := d.fenceClose[n]; ok {
		return d.Line(off)
	}
	return -1
}

// CodeSpanMarks returns where the code span n opens, where its closing
// backticks start (-1: not known) and how many backticks each has.
func (d *Doc) CodeSpanMarks(n *ast.CodeSpan) (open, close, k int) {
	s, ok := d.Inline(n)
	if !ok {
		return n.Pos(), -1, 0
	}
	k = runLen(d.Source, s.Start, '`')
	return s.Start, s.End - k, k
}

// runLen returns how many c characters start at s[i].
func runLen(s []byte, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}
