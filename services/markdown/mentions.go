package markdown

import (
	"reflect"
	"sync"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// The project's own inline syntax, `@path` mentions and bracketed
// references ("[a.md:3]", "[a.md#Intro]"), is read by goldmark inline
// parsers over a parse of its own: the blocks of Parse except indented code
// (a pasted text indented by four spaces still mentions its paths), no link
// reference definitions, and as inlines only code spans (where nothing
// counts) and these two. Links, emphasis and the rest of Markdown leave the
// mentions in them alone, so they are not parsed.

// kindMention is the node kind of a mention.
var kindMention = ast.NewNodeKind("Mention")

// mention is an `@path` mention (path set) or text shaped like a reference
// (raw set; reason says why it is invalid, "" when it is valid).
type mention struct {
	ast.BaseInline
	path   string
	ref    Ref
	reason string
}

func (n *mention) Kind() ast.NodeKind { return kindMention }

func (n *mention) Dump(source []byte, level int) { ast.DumpHelper(n, source, level, nil, nil) }

// mentionParser parses texts for mentions.
var mentionParser = sync.OnceValue(func() parser.Parser {
	skip := map[reflect.Type]bool{
		reflect.TypeOf(parser.NewHTMLBlockParser()): true,
		reflect.TypeOf(parser.NewCodeBlockParser()): true,
	}
	paragraph := reflect.TypeOf(parser.NewParagraphParser())
	var blocks []util.PrioritizedValue
	for _, v := range parser.DefaultBlockParsers() {
		switch t := reflect.TypeOf(v.Value); {
		case t == paragraph:
			blocks = append(blocks, util.Prioritized(indentedParagraph{v.Value.(parser.BlockParser)}, v.Priority))
		case !skip[t]:
			blocks = append(blocks, v)
		}
	}
	return parser.NewParser(parser.WithBlockParsers(blocks...), parser.WithInlineParsers(
		util.Prioritized(parser.NewCodeSpanParser(), 100),
		util.Prioritized(escapeParser{}, 200),
		util.Prioritized(atPathParser{}, 300),
		util.Prioritized(refParser{}, 300)))
})

// indentedParagraph is a paragraph that may start indented by four spaces
// or more, where Markdown would see indented code.
type indentedParagraph struct{ parser.BlockParser }

func (indentedParagraph) CanAcceptIndentedLine() bool { return true }

// mentions returns the mentions in src, in order.
func mentions(src string) []*mention {
	var out []*mention
	root := mentionParser().Parse(text.NewReader([]byte(src)))
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if m, ok := n.(*mention); ok && entering {
			out = append(out, m)
		}
		return ast.WalkContinue, nil
	})
	return out
}

// escapeParser keeps a backslash from hiding the "@" or "[" after it: a
// mention or reference written right after one still counts.
type escapeParser struct{}

func (escapeParser) Trigger() []byte { return []byte{'\\'} }

func (escapeParser) Parse(_ ast.Node, block text.Reader, _ parser.Context) ast.Node {
	line, seg := block.PeekLine()
	if len(line) < 2 || line[1] != '@' && line[1] != '[' {
		return nil
	}
	block.Advance(1)
	return ast.NewTextSegment(seg.WithStop(seg.Start + 1))
}

// atPathParser reads an `@path` mention (see ParseAtPaths).
type atPathParser struct{}

func (atPathParser) Trigger() []byte { return []byte{'@'} }

func (atPathParser) Parse(_ ast.Node, block text.Reader, _ parser.Context) ast.Node {
	// Not after a path's byte: an e-mail address, a URL like x.com/@user.
	if _, pos := block.Position(); pos.Start > 0 {
		if c := block.Source()[pos.Start-1]; isPathByte(c) || c == '@' {
			return nil
		}
	}
	line, _ := block.PeekLine()
	j := 1
	for j < len(line) && isPathByte(line[j]) {
		j++
	}
	p := trimDots(string(line[1:j]))
	if !isMentionPath(p) {
		return nil
	}
	block.Advance(j)
	return &mention{path: p}
}

// refParser reads text shaped like a reference (see ScanRefs): brackets
// on one line around at most maxRefLen bytes without brackets, not followed
// by "(" or "[" (a Markdown link).
type refParser struct{}

func (refParser) Trigger() []byte { return []byte{'['} }

func (refParser) Parse(_ ast.Node, block text.Reader, _ parser.Context) ast.Node {
	line, _ := block.PeekLine()
	j := 1
	for j < len(line) && j <= maxRefLen+1 && line[j] != ']' && line[j] != '[' && line[j] != '\n' {
		j++
	}
	if j >= len(line) || line[j] != ']' || j+1 < len(line) && (line[j+1] == '(' || line[j+1] == '[') {
		return nil
	}
	ref, reason, ok := parseRef(string(line[1:j]))
	if !ok {
		return nil
	}
	ref.Raw = string(line[:j+1])
	block.Advance(1) // an @path mention in it still counts
	return &mention{ref: ref, reason: reason}
}
