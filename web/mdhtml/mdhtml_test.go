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

// TestCodeBlockLanguages: the kept languages are highlighted (html's
// embedded script and css go through the lexers they name), the common
// aliases find them, and a language without a lexer shows as plain,
// escaped code.
func TestCodeBlockLanguages(t *testing.T) {
	for _, c := range []struct{ lang, code, want string }{
		{"python", "def f(x):\n    return x", `<span class="k">def</span>`},
		{"py", "import os", `<span class="kn">import</span>`},
		{"bash", "echo hi", `<span class="nb">echo</span>`},
		{"sh", "echo hi", `<span class="nb">echo</span>`},
		{"js", "const a = 1;", `<span class="kr">const</span>`},
		{"ts", "let a: number = 1", `<span class="kt">number</span>`},
		{"json", `{"a": true}`, `<span class="kc">true</span>`},
		{"sql", "SELECT 1", `<span class="k">SELECT</span>`},
		{"html", "<script>var a = 1;</script><style>p { color: red }</style>", `<span class="kd">var</span>`},
		{"dockerfile", "FROM alpine\nRUN echo hi", `<span class="k">FROM</span>`},
		{"golang", "package main", `<span class="kn">package</span>`},
		{"rust", "fn main() {}", `<span class="k">fn</span>`},
		{"yaml", "a: b", `<pre class="chroma">`},
		{"cobol", "DISPLAY '<x>'.", `<pre><code class="language-cobol">DISPLAY &#39;&lt;x&gt;&#39;.`},
		{"", "a < b", `<pre><code>a &lt; b`},
	} {
		out := Render("```" + c.lang + "\n" + c.code + "\n```")
		if !strings.Contains(out, c.want) {
			t.Errorf("%q block: rendered HTML lacks %q:\n%s", c.lang, c.want, out)
		}
	}
	if css := CSS(); !strings.Contains(css, ".chroma .kd") {
		t.Errorf("code.css lacks the keyword class:\n%.300s", css)
	}
}
