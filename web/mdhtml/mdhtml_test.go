package mdhtml

import (
	"regexp"
	"strings"
	"testing"
)

func TestRenderMarkdown(t *testing.T) {
	out := Render("# Title\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```go\nfunc main() { x := 1 < 2 }\n```\n\nSee [docs](https://example.test/d) and `code`.")
	for _, want := range []string{"<h1", "<li>one</li>", "<table>", "<td>1</td>", `<pre class="chroma"`, `<span class="kd">func</span>`,
		`href="https://example.test/d"`, `target="_blank"`, `noopener`, "<code>code</code>", "&lt;"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered HTML lacks %q:\n%s", want, out)
		}
	}
}

// tags are the real tags of rendered HTML (escaped text is &lt;…).
var tags = regexp.MustCompile(`<[^>]*>`)

// TestRenderIsInert: whatever the model writes, no script, handler or
// javascript: URL reaches the page as markup (it may show as text).
func TestRenderIsInert(t *testing.T) {
	for _, in := range []string{
		"<script>alert(1)</script>",
		"<img src=x onerror=alert(1)>",
		"[click](javascript:alert(1))",
		"<a href=\"javascript:alert(1)\">x</a>",
		"![x](javascript:alert(1))",
		"<iframe src=\"https://evil.test\"></iframe>",
		"<div onclick=\"alert(1)\">hi</div>",
		"<div>\n<script>alert(1)</script>\n</div>",
		"[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
		"```\n</code></pre><script>alert(1)</script>\n```",
	} {
		out := Render(in)
		for _, tag := range tags.FindAllString(strings.ToLower(out), -1) {
			for _, bad := range []string{"<script", "onerror", "onclick", "javascript:", "<iframe", "data:text/html"} {
				if strings.Contains(tag, bad) {
					t.Errorf("Render(%q) = %q has the tag %q", in, out, tag)
				}
			}
		}
	}
}

// TestRawHTMLShowsAsText: a line holding a block-level tag does not start
// an HTML block that hides the lines after it; every tag the page will
// not render is shown as escaped text, and the Markdown around it still
// renders.
func TestRawHTMLShowsAsText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"<div>\nfirst plain line\nsecond **bold** line\n</div>\n\nafter", "<p>&lt;div&gt;<br>\nfirst plain line<br>\nsecond <strong>bold</strong> line<br>\n&lt;/div&gt;</p>\n<p>after</p>"},
		{"Before\n<table>\nhidden row?\n\nnext paragraph", "<p>Before<br>\n&lt;table&gt;<br>\nhidden row?</p>\n<p>next paragraph</p>"},
		{"<!-- a comment -->\nvisible", "<p>&lt;!-- a comment --&gt;<br>\nvisible</p>"},
		{"a <b>bold?</b> c", "<p>a &lt;b&gt;bold?&lt;/b&gt; c</p>"},
		{"<script>alert(1)</script>\ntext", "<p>&lt;script&gt;alert(1)&lt;/script&gt;<br>\ntext</p>"},
		{"- item\n  <details>\n  inside the item", "<ul>\n<li>item<br>\n&lt;details&gt;<br>\ninside the item</li>\n</ul>"},
	} {
		if got := Render(c.in); got != c.want {
			t.Errorf("Render(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
