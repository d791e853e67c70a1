// Package mdhtml renders the agent's Markdown answers as HTML for the chat
// page: the tree services/markdown parses (GitHub-flavoured: tables,
// strikethrough, task lists, autolinks) rendered by goldmark, code blocks
// highlighted by chroma (CSS classes, see CSS), and the result sanitised by
// bluemonday, so that no script, event handler or javascript: URL survives
// whatever the model wrote. Raw HTML in the Markdown is shown as escaped
// text, never dropped: the parse has no HTML blocks, so a "<div>" line
// cannot take the lines after it along. Links open in a new tab with
// rel="noopener noreferrer nofollow".
package mdhtml

import (
	"bytes"
	"regexp"
	"strings"
	"sync"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"

	"github.com/switchboard/switchboard/services/markdown"
)

// maxInput bounds what is rendered: a longer text is shown as plain text
// by the page (rendering is linear, but the page need not lay out 1 MB of
// HTML).
const maxInput = 256 << 10

// md and policy are built on the first Render (a server that never shows
// the chat page never needs them; they are ~0.3 MiB and a millisecond of
// start-up). Only md's renderer is used: the text is parsed by
// markdown.Parse.
var (
	md = sync.OnceValue(func() goldmark.Markdown {
		return goldmark.New(
			goldmark.WithExtensions(extension.GFM),
			// Raw HTML in the Markdown is shown as text, escaped; code
			// blocks are highlighted (highlight.go).
			goldmark.WithRendererOptions(html.WithHardWraps(),
				renderer.WithNodeRenderers(util.Prioritized(rawHTMLAsText{}, 100), util.Prioritized(codeBlocks{}, 200))),
		)
	})
	policy = sync.OnceValue(newPolicy)
)

// rawHTMLAsText renders raw HTML as the escaped text the model wrote:
// visible, inert, never dropped. (markdown.Parse makes no HTML blocks: a
// "<div>" line is a paragraph holding raw HTML.)
type rawHTMLAsText struct{}

func (rawHTMLAsText) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindRawHTML, func(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segs := n.(*ast.RawHTML).Segments
			for i := range segs.Len() {
				seg := segs.At(i)
				_, _ = w.Write(util.EscapeHTML(seg.Value(source)))
			}
		}
		return ast.WalkSkipChildren, nil
	})
}

func newPolicy() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	// chroma's classes (short lowercase names) on code, spans and pre.
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^[a-z0-9 -]{1,64}$`)).OnElements("span", "pre", "code", "div")
	p.AllowAttrs("type", "checked", "disabled").OnElements("input")
	p.AllowElements("input")
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowURLSchemes("http", "https", "mailto")
	return p
}

// Render returns the sanitised HTML of Markdown text, or "" when the text
// is too long to render (the page then shows it as plain text).
func Render(text string) string {
	if len(text) > maxInput || strings.TrimSpace(text) == "" {
		return ""
	}
	var buf bytes.Buffer
	doc := markdown.Parse(text)
	if err := md().Renderer().Render(&buf, doc.Source, doc.Root); err != nil {
		return ""
	}
	return strings.TrimSpace(policy().Sanitize(buf.String()))
}

// CSS is the stylesheet of the highlighted code's classes.
var CSS = sync.OnceValue(func() string {
	var buf bytes.Buffer
	_ = formatter().WriteCSS(&buf, codeStyle())
	return buf.String()
})
