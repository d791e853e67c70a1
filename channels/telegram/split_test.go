package telegram

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkChunks checks Split's guarantees for in and returns the chunks.
func checkChunks(t testing.TB, in string, limit int) []Chunk {
	t.Helper()
	chunks := Split(in, limit)
	if in == "" {
		if chunks != nil {
			t.Fatalf("Split(%q) = %q, want nil", in, chunks)
		}
		return nil
	}
	limit = max(limit, minLimit)
	var sources, visible strings.Builder
	for i, c := range chunks {
		if c.HTML == "" || c.Source == "" {
			t.Fatalf("Split(%q, %d): chunk %d is empty: %+v", in, limit, i, c)
		}
		if n := utf8.RuneCountInString(c.HTML); n > limit {
			t.Fatalf("Split(%q, %d): chunk %d has %d runes: %q", in, limit, i, n, c.HTML)
		}
		if n := VisibleLen(c.HTML); n > limit {
			t.Fatalf("Split(%q, %d): chunk %d shows %d UTF-16 units: %q", in, limit, i, n, c.HTML)
		}
		if err := ValidHTML(c.HTML); err != nil {
			t.Fatalf("Split(%q, %d): chunk %d %q: %v", in, limit, i, c.HTML, err)
		}
		sources.WriteString(c.Source)
		visible.WriteString(visibleText(c.HTML))
	}
	if sources.String() != in {
		t.Fatalf("Split(%q, %d): sources join to %q", in, limit, sources.String())
	}
	if want := visibleText(Render(in)); visible.String() != want {
		t.Fatalf("Split(%q, %d): visible text\n got %q\nwant %q", in, limit, visible.String(), want)
	}
	return chunks
}

func TestSplitShort(t *testing.T) {
	t.Parallel()
	in := "# Hi\n\nSome **bold** text."
	chunks := checkChunks(t, in, MaxMessageLen)
	if len(chunks) != 1 || chunks[0].HTML != Render(in) || chunks[0].Source != in {
		t.Errorf("Split(%q) = %q, want one chunk equal to Render", in, chunks)
	}
	if got := Split("", MaxMessageLen); got != nil {
		t.Errorf("Split(\"\") = %q, want nil", got)
	}
}

// answer builds an LLM-style answer of about n bytes: paragraphs of
// sentences with some formatting.
func answer(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Paragraph %d starts with **a bold claim** and `some_code()`. ", i)
		for s := 0; s < 5+i%7; s++ {
			fmt.Fprintf(&b, "Sentence %d explains why a < b & c > d holds in *most* cases. ", s)
		}
		b.WriteString("The end.\n\n")
	}
	return b.String()
}

func TestSplitParagraphs(t *testing.T) {
	t.Parallel()
	in := answer(10_000)
	chunks := checkChunks(t, in, MaxMessageLen)
	if len(chunks) < 3 {
		t.Fatalf("Split of %d bytes gave %d chunks", len(in), len(chunks))
	}
	for i, c := range chunks[:len(chunks)-1] {
		if !strings.HasSuffix(c.Source, "\n\n") {
			t.Errorf("chunk %d does not end at a paragraph break: ...%q", i, c.Source[len(c.Source)-40:])
		}
		if n := utf8.RuneCountInString(c.HTML); n < MaxMessageLen/2 {
			t.Errorf("chunk %d has only %d runes", i, n)
		}
	}
}

func TestSplitPrefersLinesThenSentencesThenSpaces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, suffix string
	}{
		{"lines", strings.Repeat("a line of text here\n", 20), "\n"},
		{"sentences", strings.Repeat("One sentence here. ", 20), ". "},
		{"spaces", strings.Repeat("word ", 60), " "},
		{"cjk sentences", strings.Repeat("世界你好。", 60), "。"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			chunks := checkChunks(t, tt.in, 100)
			for i, c := range chunks[:len(chunks)-1] {
				if !strings.HasSuffix(c.Source, tt.suffix) {
					t.Errorf("chunk %d ends with %q, want %q", i, c.Source, tt.suffix)
				}
			}
		})
	}
}

// TestSplitAtBlocksOfTheTree: the blocks of goldmark's tree are paragraph
// breaks, so a list is cut between its items rather than between the
// lines of one (when that keeps the chunk at least half full).
func TestSplitAtBlocksOfTheTree(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "- item %d begins here\n  and item %d goes on\n", i, i)
	}
	chunks := checkChunks(t, b.String(), 200)
	for i, c := range chunks[1:] {
		if !strings.HasPrefix(c.Source, "- item") {
			t.Errorf("chunk %d starts inside an item: %q", i+1, c.Source)
		}
	}
}

func TestSplitCodeBlock(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("```go\n")
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&b, "\tif x%d < y && y > z { return \"<%d>\" }\n", i, i)
	}
	b.WriteString("```")
	in := b.String()
	chunks := checkChunks(t, in, MaxMessageLen)
	if len(chunks) < 2 {
		t.Fatalf("got %d chunks", len(chunks))
	}
	const open, close = `<pre><code class="language-go">`, "</code></pre>"
	for i, c := range chunks {
		if !strings.HasPrefix(c.HTML, open) || !strings.HasSuffix(c.HTML, close) {
			t.Errorf("chunk %d is not a whole go code block: %.40q...%q", i, c.HTML, c.HTML[len(c.HTML)-20:])
		}
		if strings.Count(c.HTML, "<pre>") != 1 {
			t.Errorf("chunk %d has %d code blocks", i, strings.Count(c.HTML, "<pre>"))
		}
		if i < len(chunks)-1 && !strings.HasSuffix(c.Source, "\n") {
			t.Errorf("chunk %d does not end at a line break", i)
		}
	}
}

func TestSplitCodeBlockBetweenParagraphs(t *testing.T) {
	t.Parallel()
	code := "```sh\n" + strings.Repeat("echo hi\n", 100) + "```\n"
	in := "Intro text.\n\n" + code + "\nOutro."
	chunks := checkChunks(t, in, 300)
	if !strings.HasPrefix(chunks[0].HTML, "Intro text.\n\n<pre>") && chunks[0].Source != "Intro text.\n\n" {
		t.Errorf("first chunk = %q", chunks[0].HTML)
	}
	for i, c := range chunks {
		if strings.Contains(c.Source, "echo") && !strings.Contains(c.HTML, `<pre><code class="language-sh">`) {
			t.Errorf("chunk %d holds code outside a code block: %q", i, c.HTML)
		}
	}
}

func TestSplitLongWord(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("a", 10_000)
	chunks := checkChunks(t, in, MaxMessageLen)
	want := []int{4096, 4096, 1808}
	if len(chunks) != len(want) {
		t.Fatalf("got %d chunks, want %d", len(chunks), len(want))
	}
	for i, c := range chunks {
		if len(c.HTML) != want[i] {
			t.Errorf("chunk %d has %d runes, want %d", i, len(c.HTML), want[i])
		}
	}
}

func TestSplitWideRunes(t *testing.T) {
	t.Parallel()
	t.Run("emoji", func(t *testing.T) {
		t.Parallel()
		// Each emoji is one rune but two UTF-16 code units: 2048 per chunk.
		in := strings.Repeat("😀", 5000)
		chunks := checkChunks(t, in, MaxMessageLen)
		if len(chunks) != 3 || VisibleLen(chunks[0].HTML) != 4096 || utf8.RuneCountInString(chunks[0].HTML) != 2048 {
			t.Errorf("got %d chunks, first %d runes", len(chunks), utf8.RuneCountInString(chunks[0].HTML))
		}
	})
	t.Run("cjk", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("世界", 5000)
		chunks := checkChunks(t, in, MaxMessageLen)
		if len(chunks) != 3 || utf8.RuneCountInString(chunks[0].HTML) != 4096 {
			t.Errorf("got %d chunks", len(chunks))
		}
	})
	t.Run("joined emoji", func(t *testing.T) {
		t.Parallel()
		family := "👨\u200d👩\u200d👧\u200d👦" // 7 runes, 11 UTF-16 units
		in := strings.Repeat(family, 1000)
		for i, c := range checkChunks(t, in, MaxMessageLen) {
			if !strings.HasPrefix(c.Source, "👨") || !strings.HasSuffix(c.Source, "👦") {
				t.Errorf("chunk %d cuts a family emoji: %+q...%+q", i, c.Source[:8], c.Source[len(c.Source)-8:])
			}
		}
	})
	t.Run("combining marks", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("e\u0301", 3000)
		for i, c := range checkChunks(t, in, MaxMessageLen) {
			if !strings.HasPrefix(c.Source, "e") {
				t.Errorf("chunk %d starts with a combining mark", i)
			}
		}
	})
}

func TestSplitEscapes(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("<", 4096) // renders to 16384 runes
	chunks := checkChunks(t, in, MaxMessageLen)
	if len(chunks) != 4 {
		t.Fatalf("got %d chunks, want 4", len(chunks))
	}
	for i, c := range chunks {
		if c.HTML != strings.Repeat("&lt;", 1024) {
			t.Errorf("chunk %d = %.20q... (%d runes)", i, c.HTML, len(c.HTML))
		}
	}
	checkChunks(t, strings.Repeat("a&b<c>d ", 2000), MaxMessageLen)
	checkChunks(t, strings.Repeat("&", 5000), 17) // cuts never fall inside "&amp;"
}

func TestSplitReopensFormatting(t *testing.T) {
	t.Parallel()
	long := strings.TrimSpace(strings.Repeat("lorem ipsum dolor ", 350)) // about 6300 bytes
	tests := []struct {
		name, in, open, close string
	}{
		{"bold", "**" + long + "**", "<b>", "</b>"},
		{"italic", "_" + long + "_", "<i>", "</i>"},
		{"strike", "~~" + long + "~~", "<s>", "</s>"},
		{"link", "[" + long + "](https://example.com/?a=1&b=2)", `<a href="https://example.com/?a=1&amp;b=2">`, "</a>"},
		{"code", "`" + long + "`", "<code>", "</code>"},
		{"heading", "# " + long, "<b>", "</b>"},
		{"quote", strings.Repeat("> "+long[:200]+"\n", 40), "<blockquote>", "</blockquote>"},
		{"nested", "> **_" + long + "_**", "<blockquote><b><i>", "</i></b></blockquote>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			chunks := checkChunks(t, tt.in, MaxMessageLen)
			if len(chunks) < 2 {
				t.Fatalf("got %d chunks", len(chunks))
			}
			for i, c := range chunks {
				body := strings.TrimRight(c.HTML, "\n")
				if !strings.HasPrefix(body, tt.open) || !strings.HasSuffix(body, tt.close) {
					t.Errorf("chunk %d = %.60q...%q", i, c.HTML, c.HTML[len(c.HTML)-30:])
				}
			}
		})
	}
}

func TestSplitSmallLimits(t *testing.T) {
	t.Parallel()
	in := "# Title\n\n> quote with **bold [link](https://example.com/a/long/path?with=query&and=more) text** end\n\n" +
		"- item `code`\n\n```python\nprint('<hello>')\n```\n" + strings.Repeat("&<>", 30)
	for _, limit := range []int{-1, 0, 5, 16, 17, 20, 32, 64, 100} {
		checkChunks(t, in, limit)
	}
	// A reopened link longer than the limit: the chunk drops its formatting.
	chunks := checkChunks(t, "[a b c d e f](https://example.com/a/long/path/that/does/not/fit)", 32)
	if strings.Contains(chunks[0].HTML, "<a") {
		t.Errorf("chunk = %q, want it without the link", chunks[0].HTML)
	}
}

func TestSplitBlankInput(t *testing.T) {
	t.Parallel()
	checkChunks(t, strings.Repeat("\n", 10_000), MaxMessageLen)
	checkChunks(t, strings.Repeat(" \n\n", 100), 16)
}

// TestSplitRandomDocuments checks Split's guarantees on documents stitched
// together from Markdown fragments, which reach nested and crossing markup
// more often than byte-level fuzzing.
func TestSplitRandomDocuments(t *testing.T) {
	t.Parallel()
	fragments := []string{
		"**", "*", "_", "__", "***", "~~", "`", "``", "\\", "\\*", "[", "]", "(", ")", "](https://x.y/?a=1&b=2)",
		"[link text](https://example.com/p)", "```go\n", "```\n", "~~~\n", "\n```", "> ", ">", "# ", "## ", "- ", "* ",
		"\n", "\n\n", " ", "  ", "\t", "word", "snake_case", "Sentence. ", "<", ">", "&", "\"", "😀", "👨\u200d👩",
		"e\u0301", "世界。", "\r\n", "tg://x", "\u00a0",
		"|", "| ", " |\n", "|---|---|\n", "|:-:|--:|\n", "\\|", "- [ ] ", "- [x] ", "[X] ",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.IntN(300); n > 0; n-- {
			b.WriteString(fragments[rng.IntN(len(fragments))])
		}
		in := b.String()
		checkUnits(t, in)
		checkChunks(t, in, minLimit+rng.IntN(200))
		if i%10 == 0 {
			checkChunks(t, in, MaxMessageLen)
		}
	}
}

// fuzzSeeds are inputs that exercise the parser's edges.
var fuzzSeeds = []string{
	"",
	"a",
	"**bold** *it* _it_ __b__ ~~s~~ `c` [l](https://x.y)",
	"***x*** **a *b* c** *a **b** c* ~~a **b** c~~",
	"my_var_name __init__ a * b 2*3*4 src/*/*.go",
	"**unclosed *also _and ~~ ` [ ](",
	"# H\n## **H2**\n####### no\n#no",
	"> q\n>\n> **b**\n>> n\n> - x\n> ```\n",
	"- a\n* b\n+ c\n  - d\n---\n1. e",
	"```go\nfunc() { a < b }\n```\n```\nunclosed\n",
	"````\n```\n````\n~~~\n~~~",
	"```\n```",
	"[a](javascript:x) [b](https://a.b/(c)) [`c`](tg://x) [**d**](mailto:a@b)",
	"[x](https://a.b/?q=\"&<>)",
	"\\*\\_\\`\\[\\<\\&\\\\",
	"&<>\"'&amp;&lt;",
	"😀👨\u200d👩\u200d👧🇺🇸e\u0301世界。",
	"a\r\nb\r\n\r\nc",
	"\x00\x01\t\v\f",
	strings.Repeat("<", 100),
	strings.Repeat("**a** ", 50),
	strings.Repeat("> x\n", 30),
	"```py\n" + strings.Repeat("x = '<>'\n", 20) + "```",
	"[" + strings.Repeat("w ", 40) + "](https://example.com/" + strings.Repeat("p", 80) + ")",
	"| a | **b** |\n|:--|--:|\n| 1 & 2 | `<x>` |\n| \\| |",
	"| Product | Description | Price |\n|---|---|---|\n| W | " + strings.Repeat("long ", 20) + "| 1 |\n|  | | |",
	"- [ ] todo\n- [x] done\n* [X] x\n- [y] no\n- [ ]",
	"x|y\n-|-\n|\n| |\n|---|",
	"- > a\n  > b\n>\t> c\n> ```\n> > d\n   > e\n-\t[x]\tf\n- [ ]x",
	"| *a* | a**b |\n|---|---|\n| `x\\|y` | [l](http://a.b) \\* |",
}

func FuzzRenderSplit(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, uint16(i*7))
	}
	f.Fuzz(func(t *testing.T, in string, small uint16) {
		if !utf8.ValidString(in) {
			t.Skip()
		}
		if err := ValidHTML(Render(in)); err != nil {
			t.Fatalf("Render(%q) = %q: %v", in, Render(in), err)
		}
		checkUnits(t, in)
		checkChunks(t, in, MaxMessageLen)
		checkChunks(t, in, 64)
		checkChunks(t, in, minLimit+int(small%256))
	})
}
