package mdhtml

import (
	"bytes"
	"embed"
	"io/fs"
	"sync"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// Code blocks are highlighted by chroma's core with the few lexers below,
// built on the first code block, and the "github" style. Not chroma's
// lexers and styles packages (nor goldmark-highlighting, which imports
// them): their package initialisation parses ~280 lexers and ~70 styles
// at every start, ~5 MiB of resident memory and ~0.1 s for a page that
// may never be opened (docs/OPERATIONS.md, Memory). The XML files are
// chroma's own (v2.27.0, MIT, chroma/COPYING).
//
//go:embed chroma/*.xml
var chromaFS embed.FS

// registry holds the lexers of the languages a chat answer is likely to
// use; a block in another language is shown as plain code.
var registry = sync.OnceValue(func() *chroma.LexerRegistry {
	reg := chroma.NewLexerRegistry()
	paths, err := fs.Glob(chromaFS, "chroma/*.xml")
	if err != nil {
		panic(err)
	}
	for _, p := range paths {
		if p == styleFile {
			continue
		}
		reg.Register(chroma.MustNewXMLLexer(chromaFS, p))
	}
	reg.Register(goLexer())
	return reg
})

const styleFile = "chroma/style-github.xml"

var codeStyle = sync.OnceValue(func() *chroma.Style {
	f, err := chromaFS.Open(styleFile)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	s, err := chroma.NewXMLStyle(f)
	if err != nil {
		panic(err)
	}
	return s
})

var formatter = sync.OnceValue(func() *chromahtml.Formatter {
	return chromahtml.New(chromahtml.WithClasses(true), chromahtml.PreventSurroundingPre(false))
})

// codeBlocks renders fenced code blocks: highlighted (<pre class="chroma">
// with chroma's classes) when the language is known, else escaped in
// <pre><code class="language-…">.
type codeBlocks struct{}

func (codeBlocks) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindFencedCodeBlock, renderFencedCode)
}

func renderFencedCode(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.FencedCodeBlock)
	lang := n.Language(source)
	var code bytes.Buffer
	for i := range n.Lines().Len() {
		line := n.Lines().At(i)
		code.Write(line.Value(source))
	}
	if lang != nil {
		if lexer := registry().Get(string(lang)); lexer != nil {
			it, err := chroma.Coalesce(lexer).Tokenise(nil, code.String())
			if err == nil && formatter().Format(w, codeStyle(), it) == nil {
				return ast.WalkContinue, nil
			}
		}
	}
	_, _ = w.WriteString("<pre><code")
	if lang != nil {
		_, _ = w.WriteString(` class="language-`)
		html.DefaultWriter.Write(w, lang)
		_, _ = w.WriteString(`"`)
	}
	_ = w.WriteByte('>')
	html.DefaultWriter.RawWrite(w, code.Bytes())
	_, _ = w.WriteString("</code></pre>\n")
	return ast.WalkContinue, nil
}

// goLexer is chroma's Go lexer (lexers/go.go, written in Go there, not
// XML), with raw strings as plain strings instead of Go templates.
func goLexer() chroma.Lexer {
	return chroma.MustNewLexer(&chroma.Config{
		Name:      "Go",
		Aliases:   []string{"go", "golang"},
		Filenames: []string{"*.go"},
		MimeTypes: []string{"text/x-gosrc"},
	}, goRules)
}

func goRules() chroma.Rules {
	types := []string{`uint`, `uint8`, `uint16`, `uint32`, `uint64`, `int`, `int8`, `int16`, `int32`, `int64`, `float`, `float32`, `float64`, `complex64`, `complex128`, `byte`, `rune`, `string`, `bool`, `error`, `uintptr`}
	builtins := append(append([]string{}, types...), `print`, `println`, `panic`, `recover`, `close`, `complex`, `real`, `imag`, `len`, `cap`, `append`, `copy`, `delete`, `new`, `make`, `clear`, `min`, `max`)
	return chroma.Rules{
		"root": {
			{Pattern: `\n`, Type: chroma.TextWhitespace},
			{Pattern: `\s+`, Type: chroma.TextWhitespace},
			{Pattern: `//[^\s\n\r][^\n\r]*`, Type: chroma.CommentPreproc},
			{Pattern: `//[^\n\r]*`, Type: chroma.CommentSingle},
			{Pattern: `/(\\\n)?[*](.|\n)*?[*](\\\n)?/`, Type: chroma.CommentMultiline},
			{Pattern: `(import|package)\b`, Type: chroma.KeywordNamespace},
			{Pattern: `(var|func|struct|map|chan|type|interface|const)\b`, Type: chroma.KeywordDeclaration},
			{Pattern: chroma.Words(``, `\b`, `break`, `default`, `select`, `case`, `defer`, `go`, `else`, `goto`, `switch`, `fallthrough`, `if`, `range`, `continue`, `for`, `return`), Type: chroma.Keyword},
			{Pattern: `(true|false|iota|nil)\b`, Type: chroma.KeywordConstant},
			{Pattern: chroma.Words(``, `\b(\()`, builtins...), Type: chroma.ByGroups(chroma.NameBuiltin, chroma.Punctuation)},
			{Pattern: chroma.Words(``, `\b`, append(types, `any`)...), Type: chroma.KeywordType},
			{Pattern: `\d+i`, Type: chroma.LiteralNumber},
			{Pattern: `\d+\.\d*([Ee][-+]\d+)?i`, Type: chroma.LiteralNumber},
			{Pattern: `\.\d+([Ee][-+]\d+)?i`, Type: chroma.LiteralNumber},
			{Pattern: `\d+[Ee][-+]\d+i`, Type: chroma.LiteralNumber},
			{Pattern: `\d+(\.\d+[eE][+\-]?\d+|\.\d*|[eE][+\-]?\d+)`, Type: chroma.LiteralNumberFloat},
			{Pattern: `\.\d+([eE][+\-]?\d+)?`, Type: chroma.LiteralNumberFloat},
			{Pattern: `0[0-7]+`, Type: chroma.LiteralNumberOct},
			{Pattern: `0[xX][0-9a-fA-F_]+`, Type: chroma.LiteralNumberHex},
			{Pattern: `0b[01_]+`, Type: chroma.LiteralNumberBin},
			{Pattern: `(0|[1-9][0-9_]*)`, Type: chroma.LiteralNumberInteger},
			{Pattern: `'(\\['"\\abfnrtv]|\\x[0-9a-fA-F]{2}|\\[0-7]{1,3}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|[^\\])'`, Type: chroma.LiteralStringChar},
			{Pattern: "`[^`]*`", Type: chroma.LiteralString},
			{Pattern: `"(\\\\|\\"|[^"])*"`, Type: chroma.LiteralString},
			{Pattern: `(<<=|>>=|<<|>>|<=|>=|&\^=|&\^|\+=|-=|\*=|/=|%=|&=|\|=|&&|\|\||<-|\+\+|--|==|!=|:=|\.\.\.|[+\-*/%&])`, Type: chroma.Operator},
			{Pattern: `([a-zA-Z_]\w*)(\s*)(\()`, Type: chroma.ByGroups(chroma.NameFunction, chroma.UsingSelf("root"), chroma.Punctuation)},
			{Pattern: `[|^<>=!()\[\]{}.,;:~]`, Type: chroma.Punctuation},
			{Pattern: `[^\W\d]\w*`, Type: chroma.NameOther},
		},
	}
}
