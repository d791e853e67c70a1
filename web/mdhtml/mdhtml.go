// Package mdhtml renders the agent's Markdown answers as HTML for the chat
// page: GitHub-flavoured Markdown (tables, strikethrough, task lists,
// autolinks) by goldmark, code blocks highlighted by chroma (CSS classes,
// see CSS), and the result sanitised by bluemonday, so that no script,
// event handler or javascript: URL survives whatever the model wrote. Links
// open in a new tab with rel="noopener noreferrer nofollow".
package mdhtml

import (
	"bytes"
	"regexp"
	"strings"
	"sync"

	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	highlighting "github.com/yuin/goldmark-highlighting/v2"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"
)

// maxInput bounds what is rendered: a longer text is shown as plain text
// by the page (rendering is linear, but the page need not lay out 1 MB of
// HTML).
const maxInput = 256 << 10

const style = "github"

// md and policy are built on the first Render (a server that never shows
// the chat page never needs them; they are ~0.3 MiB and a millisecond of
// start-up).
var (
	md = sync.OnceValue(func() goldmark.Markdown {
		return goldmark.New(
			goldmark.WithExtensions(extension.GFM,
				highlighting.NewHighlighting(highlighting.WithStyle(style),
					highlighting.WithFormatOptions(chromahtml.WithClasses(true), chromahtml.PreventSurroundingPre(false)))),
			// Raw HTML in the Markdown is escaped, not passed through.
			goldmark.WithRendererOptions(html.WithHardWraps()),
		)
	})
	policy = sync.OnceValue(newPolicy)
)

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
	if err := md().Convert([]byte(text), &buf); err != nil {
		return ""
	}
	return strings.TrimSpace(policy().Sanitize(buf.String()))
}

var (
	cssOnce sync.Once
	css     string
)

// CSS is the stylesheet of the highlighted code's classes.
func CSS() string {
	cssOnce.Do(func() {
		var buf bytes.Buffer
		f := chromahtml.New(chromahtml.WithClasses(true))
		_ = f.WriteCSS(&buf, styles.Get(style))
		css = buf.String()
	})
	return css
}
