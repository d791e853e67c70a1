package mdhtml

import (
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

// TestRenderIsInert: whatever the model writes, no script, handler or
// javascript: URL reaches the page.
func TestRenderIsInert(t *testing.T) {
	for _, in := range []string{
		"<script>alert(1)</script>",
		"<img src=x onerror=alert(1)>",
		"[click](javascript:alert(1))",
		"<a href=\"javascript:alert(1)\">x</a>",
		"![x](javascript:alert(1))",
		"<iframe src=\"https://evil.test\"></iframe>",
		"<div onclick=\"alert(1)\">hi</div>",
		"[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
		"```\n</code></pre><script>alert(1)</script>\n```",
	} {
		out := strings.ToLower(Render(in))
		for _, bad := range []string{"<script", "onerror", "onclick", "javascript:", "<iframe", "data:text/html"} {
			if strings.Contains(out, bad) {
				t.Errorf("Render(%q) = %q contains %q", in, out, bad)
			}
		}
	}
}
