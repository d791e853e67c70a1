package telegram

import "testing"

func TestValidHTML(t *testing.T) {
	t.Parallel()
	valid := []string{
		"",
		"a &amp; b &lt; c &gt; d &quot; \"e\"",
		"<b>x</b><strong>x</strong><i>x</i><em>x</em><u>x</u><s>x</s>",
		"<tg-spoiler>x</tg-spoiler>",
		"<code>x</code>",
		"<pre>x</pre>",
		`<pre><code class="language-go">x</code></pre>`,
		`<pre><code>x</code></pre>`,
		`<a href="https://x.y/?a=1&amp;b=&quot;2&quot;">y</a>`,
		`<a href="tg://user?id=1"><b>y</b></a>`,
		"<blockquote><b>x <i>y</i></b></blockquote>",
		"<b><code>x</code></b>",
		"<b></b>",
		"😀 世界",
	}
	for _, h := range valid {
		if err := ValidHTML(h); err != nil {
			t.Errorf("ValidHTML(%q) = %v, want nil", h, err)
		}
	}
	invalid := []string{
		"<b>x",
		"</b>",
		"<b><i>x</b></i>",
		"<div>x</div>",
		"<br>",
		"a & b",
		"a &nbsp; b",
		"a &#60; b",
		"a > b",
		"<b",
		"<a>x</a>",
		`<a href="x" target="y">z</a>`,
		`<a href="x>y">z</a>`,
		`<a href="x&y">z</a>`,
		`<b class="x">y</b>`,
		`<code class="language-go">x</code>`,
		`<pre><code class="go">x</code></pre>`,
		"<code><b>x</b></code>",
		"<pre><b>x</b></pre>",
		"<pre>x<code>y</code></pre>",
		"<pre><code>y</code>x</pre>",
		`<a href="x"><a href="y">z</a></a>`,
		`<a href="x"><code>y</code></a>`,
		"<blockquote><blockquote>x</blockquote></blockquote>",
		"\xff",
	}
	for _, h := range invalid {
		if err := ValidHTML(h); err == nil {
			t.Errorf("ValidHTML(%q) = nil, want an error", h)
		}
	}
}

func TestVisibleLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		html string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"<b>ab</b>", 2},
		{"&lt;&amp;&gt;&quot;", 4},
		{"&nbsp;", 6},
		{"世界", 2},
		{"😀", 2},
		{"👨‍👩‍👧", 8},
		{`<a href="x>y">z</a>`, 1},
		{`<pre><code class="language-go">x</code></pre>`, 1},
	}
	for _, tt := range tests {
		if got := VisibleLen(tt.html); got != tt.want {
			t.Errorf("VisibleLen(%q) = %d, want %d", tt.html, got, tt.want)
		}
	}
}
