package markdown

import (
	"slices"
	"testing"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// TestParseIsGFMWithoutHTMLBlocks: the one parse the renderers share is
// GitHub-flavoured (a table is a table) and has no HTML blocks (a "<div>"
// line stays in its paragraph, so it cannot hide the lines after it).
func TestParseIsGFMWithoutHTMLBlocks(t *testing.T) {
	t.Parallel()
	d := Parse("<div>\nplain **text**\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
	first := d.Root.FirstChild()
	if first == nil || first.Kind() != ast.KindParagraph {
		t.Fatalf("first block = %v, want a paragraph", first)
	}
	if second := first.NextSibling(); second == nil || second.Kind() != east.KindTable {
		t.Fatalf("second block = %v, want a table", second)
	}
	if got := d.Line(len(d.Source) - 1); got != 5 {
		t.Errorf("line of the last byte = %d, want 5", got)
	}
}

// TestMentionsAndRefsOutsideFencesAndSpans: code is fenced code and code
// spans only; an indented line (a pasted text) still mentions its paths,
// and a fence in a quote or list is code.
func TestMentionsAndRefsOutsideFencesAndSpans(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"    @indented/path.md", []string{"indented/path.md"}},
		{"> ```\n> @in/quote.md\n> ```\n@after.md", []string{"after.md"}},
		{"- item\n  ```\n  @in/item.md\n  ```", nil},
		{"\\`@escaped.md\\`", []string{"escaped.md"}},
	} {
		if got := ParseAtPaths(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseAtPaths(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if refs := ParseRefs("```\n[a.md:1]\n```\n[b.md:2]"); len(refs) != 1 || refs[0].Path != "b.md" {
		t.Errorf("ParseRefs = %+v", refs)
	}
}

// TestQuoteMarker: the markers are what goldmark's blockquote parser read
// on each line (indentation, ">" and one space), nested ones included; a
// ">" inside a quoted fence is code, not a marker.
func TestQuoteMarker(t *testing.T) {
	t.Parallel()
	src := "  > a\n>> b\n> ```\n> > c\n> ```\n"
	d := Parse(src)
	var got []string
	for i := 0; i < len(src); {
		if m := d.QuoteMarker(i); m > i {
			got = append(got, src[i:m])
			i = m
			continue
		}
		i++
	}
	want := []string{"  > ", ">", "> ", "> ", "> ", "> "}
	if !slices.Equal(got, want) {
		t.Errorf("markers of %q = %q, want %q", src, got, want)
	}
}
