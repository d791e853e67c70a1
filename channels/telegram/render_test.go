package telegram

import (
	"strings"
	"testing"
)

var renderTests = []struct {
	name, in, want string
}{
	{"empty", "", ""},
	{"plain", "hello world", "hello world"},
	{"escaping", `a < b && c > d "q" 'q'`, `a &lt; b &amp;&amp; c &gt; d "q" 'q'`},
	{"entity-like text", "&amp; &lt;", "&amp;amp; &amp;lt;"},
	{"html-like text", "<b>not bold</b>", "&lt;b&gt;not bold&lt;/b&gt;"},
	{"invalid utf8", "a\xffb", "a\uFFFDb"},

	{"bold stars", "a **bold** b", "a <b>bold</b> b"},
	{"bold underscores", "a __bold__ b", "a <b>bold</b> b"},
	{"italic star", "a *it* b", "a <i>it</i> b"},
	{"italic underscore", "a _it_ b", "a <i>it</i> b"},
	{"bold italic", "***both***", "<b><i>both</i></b>"},
	{"strike", "~~gone~~ here", "<s>gone</s> here"},
	{"nested", "**bold _it_ bold**", "<b>bold <i>it</i> bold</b>"},
	{"nested other way", "*it **bold** it*", "<i>it <b>bold</b> it</i>"},
	{"escaped inside bold", "**a<b**", "<b>a&lt;b</b>"},
	{"multibyte", "**привет** 世界", "<b>привет</b> 世界"},
	{"bold then punctuation", "**Note**: done.", "<b>Note</b>: done."},

	{"snake_case", "use my_var_name here", "use my_var_name here"},
	{"snake_case file", "open file_name_v2.go", "open file_name_v2.go"},
	{"snake_case pair", "a_b and c_d", "a_b and c_d"},
	{"spaced star", "a * b * c", "a * b * c"},
	{"spaced underscore", "a _ b _ c", "a _ b _ c"},
	{"stars facing away", "a* b *c", "a* b *c"},

	{"unbalanced bold", "**bold", "**bold"},
	{"unbalanced italic", "*it", "*it"},
	{"unbalanced underscore", "_it", "_it"},
	{"unbalanced strike", "~~x", "~~x"},
	{"unbalanced code", "`code", "`code"},
	{"mismatched runs", "**a*", "**a*"},
	{"long run", "****x****", "****x****"},
	{"single tilde", "~x~", "~x~"},
	{"emphasis does not cross lines", "**a\nb**", "**a\nb**"},
	{"empty emphasis", "****", "****"},

	{"inline code", "run `go test ./...` now", "run <code>go test ./...</code> now"},
	{"code escapes", "`a<b && c>d`", "<code>a&lt;b &amp;&amp; c&gt;d</code>"},
	{"code is literal", "`**x** _y_`", "<code>**x** _y_</code>"},
	{"double backticks", "``a ` b``", "<code>a ` b</code>"},
	{"code inside bold", "**see `x`**", "<b>see <code>x</code></b>"},
	{"star inside code inside italic", "*a `*` b*", "<i>a <code>*</code> b</i>"},

	{"link", "[docs](https://go.dev/doc)", `<a href="https://go.dev/doc">docs</a>`},
	{"link http", "[x](http://a.b)", `<a href="http://a.b">x</a>`},
	{"link tg", "[me](tg://user?id=42)", `<a href="tg://user?id=42">me</a>`},
	{"link mailto", "[mail](mailto:a@b.c)", `<a href="mailto:a@b.c">mail</a>`},
	{"link scheme case", "[x](HTTPS://A.B)", `<a href="HTTPS://A.B">x</a>`},
	{"link attribute escaping", `[x](https://a.b/?q=1&r="2"<)`, `[x](https://a.b/?q=1&amp;r="2"&lt;)`},
	{"link query", `[x](https://a.b/?q=1&r="2")`, `<a href="https://a.b/?q=1&amp;r=&quot;2&quot;">x</a>`},
	{"link angle destination and title", `[a](<http://x)y> "t") z`, `<a href="http://x)y">a</a> z`},
	{"link parens", "[Go](https://en.wikipedia.org/wiki/Go_(language))", `<a href="https://en.wikipedia.org/wiki/Go_(language)">Go</a>`},
	{"link bold text", "[**b**](http://x.y)", `<a href="http://x.y"><b>b</b></a>`},
	{"link no code inside", "[`x`](http://x.y)", "<a href=\"http://x.y\">`x`</a>"},
	{"link in bold", "**see [x](http://x.y)**", `<b>see <a href="http://x.y">x</a></b>`},
	{"link javascript", "[x](javascript:alert(1))", "[x](javascript:alert(1))"},
	{"link ftp", "[x](ftp://a.b)", "[x](ftp://a.b)"},
	{"link relative", "[x](/path)", "[x](/path)"},
	{"link data", "[x](data:text/html,<b>)", "[x](data:text/html,&lt;b&gt;)"},
	{"link bare scheme", "[x](https://)", "[x](https://)"},
	{"link empty text", "[](https://a.b)", "[](https://a.b)"},
	{"link with space", "[x](https://a.b c)", "[x](https://a.b c)"},
	{"bad link keeps formatting", "[**x**](file:///etc)", "[<b>x</b>](file:///etc)"},
	{"brackets", "a [b] c", "a [b] c"},

	{"heading", "# Title", "<b>Title</b>"},
	{"heading levels", "### Sub *title*\ntext", "<b>Sub <i>title</i></b>\ntext"},
	{"hashtag", "#hashtag", "#hashtag"},
	{"lone hash", "#", "#"},
	{"seven hashes", "####### x", "####### x"},
	{"blank heading", "##   ", "##   "},

	{"quote", "> a\n> b", "<blockquote>a\nb</blockquote>"},
	{"quote then text", "> a **b**\n\nc", "<blockquote>a <b>b</b></blockquote>\n\nc"},
	{"quote no space", ">a", "<blockquote>a</blockquote>"},
	{"quote nested flattened", ">> a", "<blockquote>a</blockquote>"},
	{"quote with heading and bullet", "> # T\n> - x", "<blockquote><b>T</b>\n• x</blockquote>"},
	{"quote with empty line", "> a\n>\n> b", "<blockquote>a\n\nb</blockquote>"},
	{"empty quote", ">", "&gt;"},
	{"greater than", "a > b", "a &gt; b"},
	{"quote fence is literal", "> ```\n> x", "<blockquote>```\nx</blockquote>"},

	{"quote marker in a quoted fence is code", "> ```\n> > x\n> ```", "<blockquote>```\n&gt; x\n```</blockquote>"},

	{"bullets", "- a\n* b\n+ c", "• a\n• b\n• c"},
	{"nested bullet", "- a\n  - b", "• a\n  • b"},
	{"bullet with bold", "* **k**: v", "• <b>k</b>: v"},
	{"not a bullet", "-x and *", "-x and *"},
	{"rule", "---", "---"},
	{"numbered", "1. one\n2. two", "1. one\n2. two"},

	{"fence", "```go\nx := a<b\n```", `<pre><code class="language-go">x := a&lt;b</code></pre>`},
	{"fence no lang", "```\nx\n```\ny", "<pre>x</pre>\ny"},
	{"fence bad lang", "```<script>\nx\n```", "<pre>x</pre>"},
	{"fence info words", "```python title=x\nx\n```", `<pre><code class="language-python">x</code></pre>`},
	{"fence tildes", "~~~sh\nls\n~~~", `<pre><code class="language-sh">ls</code></pre>`},
	{"fence content literal", "```\n**x** [a](http://b.c)\n```", "<pre>**x** [a](http://b.c)</pre>"},
	{"fence longer close", "```\nx\n`````", "<pre>x</pre>"},
	{"fence short close stays", "````\nx\n```\ny\n````", "<pre>x\n```\ny</pre>"},
	{"fence indented", "  ```js\n  x\n  ```", `<pre><code class="language-js">  x</code></pre>`},
	{"fence unclosed", "```py\nprint(1)\n", `<pre><code class="language-py">print(1)</code></pre>`},
	{"fence unclosed no newline", "```\na\nb", "<pre>a\nb</pre>"},
	{"fence empty", "```\n```", "```\n```"},
	{"fence opener only", "```go", "```go"},
	{"fence opener newline only", "```\n", "```\n"},
	{"inline triple backticks", "```x```", "<code>x</code>"},

	{"escapes", `\*not\* \_it\_ \# \<`, "*not* _it_ # &lt;"},
	{"escaped heading", `\# not`, "# not"},
	{"backslash before letter", `C:\path\n`, `C:\path\n`},
	{"trailing backslash", `a\`, `a\`},
	{"crlf", "**b**\r\nc", "<b>b</b>\r\nc"},

	{"task list", "- [ ] todo\n- [x] done\n* [X] also\n  - [ ] nested", "☐ todo\n☑ done\n☑ also\n  ☐ nested"},
	{"task list formatting", "- [x] **ship** it", "☑ <b>ship</b> it"},
	{"not a task", "- [y] no\n- [ ]x\n[ ] plain", "• [y] no\n• [ ]x\n[ ] plain"},
	{"empty task", "- [ ]", "☐ "},
	{"table", "| Name | Age |\n|------|----:|\n| **Ann** | 31 |\n| Bob & co | 4 |\nafter",
		"<pre>Name     │ Age\n─────────┼────\nAnn      │  31\nBob &amp; co │   4</pre>\nafter"},
	{"table centred", "| a | b\n|:-:|---\n| xyz | `<p>`\n", "<pre> a  │ b\n────┼────\nxyz │ &lt;p&gt;</pre>\n"},
	{"table without outer pipes", "a | b\n--|--\n1 | 2", "<pre>a │ b\n──┼──\n1 │ 2</pre>"},
	{"table escaped pipe, extra and missing cells", "| a | b |\n|---|---|\n| x \\| y | 1 | extra |\n| z |",
		"<pre>a     │ b\n──────┼──\nx | y │ 1\nz</pre>"},
	{"wide table one line per row", "| Product | Description | Price |\n|---|---|---|\n| Widget | A small widget for the kitchen | **$4.99** |\n| Gadget | | $10 |",
		"<b>Product · Description · Price</b>\nWidget · A small widget for the kitchen · <b>$4.99</b>\nGadget · — · $10"},
	{"pre table cells as parsed", "| *it* | ~~x~~ | a**b |\n|---|---|---|\n| `x\\|y` | [l](http://a.b) | \\* |",
		"<pre>it  │ x               │ a**b\n────┼─────────────────┼─────\nx|y │ [l](http://a.b) │ *</pre>"},
	{"no delimiter row", "| a | b |\n| c | d |", "| a | b |\n| c | d |"},
	{"delimiter row only", "| a |\n|---|", "| a |\n|---|"},
	{"cell counts differ", "| a | b |\n|---|\n| c | d |", "| a | b |\n|---|\n| c | d |"},
	{"table ends at a blank line", "|a|\n|-|\n|b|\n\n|c|", "<pre>a\n─\nb</pre>\n\n|c|"},
}

func TestRender(t *testing.T) {
	t.Parallel()
	for _, tt := range renderTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Render(tt.in)
			if got != tt.want {
				t.Errorf("Render(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if err := ValidHTML(got); err != nil {
				t.Errorf("Render(%q) = %q: %v", tt.in, got, err)
			}
			checkUnits(t, tt.in)
		})
	}
}

// checkUnits checks the invariants of parse that Split relies on: units tile
// the source, tags balance, and a non-empty source has content.
func checkUnits(t testing.TB, src string) {
	t.Helper()
	units := parse(src)
	at, depth, content := 0, 0, false
	for i, u := range units {
		if u.start != at || u.end < u.start {
			t.Fatalf("parse(%q): unit %d spans [%d,%d), want start %d", src, i, u.start, u.end, at)
		}
		at = u.end
		switch u.kind {
		case unitOpen:
			depth++
		case unitClose:
			depth--
			if depth < 0 {
				t.Fatalf("parse(%q): unit %d closes nothing", src, i)
			}
		}
		content = content || u.content()
	}
	if at != len(src) || depth != 0 {
		t.Fatalf("parse(%q): units end at %d with depth %d", src, at, depth)
	}
	if src != "" && !content {
		t.Fatalf("parse(%q): no content", src)
	}
}

func TestRenderLongURLIsText(t *testing.T) {
	t.Parallel()
	in := "[x](https://a.b/" + strings.Repeat("p", maxURLLen) + ")"
	if got := Render(in); strings.Contains(got, "<a") {
		t.Errorf("Render of a %d-byte URL made a link", len(in))
	}
}

// TestRenderLinearTime guards against inputs that once took quadratic time
// (found by the fuzzer stalling): lines full of unmatched emphasis markers,
// unterminated links and empty quote markers. Each takes milliseconds; the
// quadratic versions took tens of seconds.
// adversarialInputs once made Split quadratic (seconds per 100 KB); they
// stay here as correctness cases and as a benchmark (no timing asserts).
var adversarialInputs = map[string]string{
	"stars":       strings.Repeat("*a ", 30_000),
	"underscores": strings.Repeat("_a ", 30_000),
	"tildes":      strings.Repeat("~~a ", 30_000),
	"mixed":       strings.Repeat("**a *b ~~c ", 10_000),
	"links":       strings.Repeat("[a](", 30_000),
	"quotes":      strings.Repeat(">\n", 30_000),
}

func TestSplitAdversarialInputs(t *testing.T) {
	t.Parallel()
	for name, in := range adversarialInputs {
		var joined strings.Builder
		for _, c := range Split(in, MaxMessageLen) {
			if err := ValidHTML(c.HTML); err != nil {
				t.Fatalf("%s: invalid chunk: %v", name, err)
			}
			joined.WriteString(c.Source)
		}
		if joined.String() != in {
			t.Fatalf("%s: sources do not join back to the input", name)
		}
	}
}

// BenchmarkSplitAdversarial: go test -run '^$' -bench SplitAdversarial ./channels/telegram/
func BenchmarkSplitAdversarial(b *testing.B) {
	for name, in := range adversarialInputs {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for i := 0; i < b.N; i++ {
				Split(in, MaxMessageLen)
			}
		})
	}
}
