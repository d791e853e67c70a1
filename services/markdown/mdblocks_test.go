package markdown

import (
	"fmt"
	"strings"
	"testing"
)

const sampleDoc = `---
title: Guide
---
# Intro
Welcome.

## Setup
Install it:

` + "```sh" + `
# not a heading
make run
` + "```" + `

- one
- two
  continued

  still item two
* three

| a | b |
|---|:-:|
| 1 | 2 |

> quoted
> # quoted heading

### Deep
text
## Usage ##
Title Two
=========
    indented code
***
`

func TestParseBlocks(t *testing.T) {
	t.Parallel()
	type want struct {
		kind       BlockKind
		start, end int
		path       string
	}
	wants := []want{
		{BlockFrontMatter, 1, 3, ""},
		{BlockHeading, 4, 4, "Intro"},
		{BlockParagraph, 5, 5, "Intro"},
		{BlockHeading, 7, 7, "Intro/Setup"},
		{BlockParagraph, 8, 8, "Intro/Setup"},
		{BlockCode, 10, 13, "Intro/Setup"},
		{BlockList, 15, 20, "Intro/Setup"},
		{BlockTable, 22, 24, "Intro/Setup"},
		{BlockQuote, 26, 27, "Intro/Setup"},
		{BlockHeading, 29, 29, "Intro/Setup/Deep"},
		{BlockParagraph, 30, 30, "Intro/Setup/Deep"},
		{BlockHeading, 31, 31, "Intro/Usage"},
		{BlockHeading, 32, 33, "Title Two"},
		{BlockCode, 34, 34, "Title Two"},
		{BlockThematicBreak, 35, 35, "Title Two"},
	}
	got := ParseBlocks(sampleDoc)
	if len(got) != len(wants) {
		for _, b := range got {
			t.Logf("%s %d-%d %q", b.Kind, b.StartLine, b.EndLine, b.Path)
		}
		t.Fatalf("got %d blocks, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		b := got[i]
		if b.Kind != w.kind || b.StartLine != w.start || b.EndLine != w.end || b.Path != w.path {
			t.Errorf("block %d = %s %d-%d %q, want %s %d-%d %q", i, b.Kind, b.StartLine, b.EndLine, b.Path, w.kind, w.start, w.end, w.path)
		}
	}
	if got[5].Lang != "sh" || !strings.Contains(got[5].Text, "# not a heading") {
		t.Errorf("code block = %+v", got[5])
	}
	if got[11].Heading != "Usage" || got[11].Level != 2 || got[12].Level != 1 {
		t.Errorf("headings = %+v / %+v", got[11], got[12])
	}
}

func TestParseBlocksEdgeCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc   string
		kinds string
	}{
		{"", ""},
		{"\n\n", ""},
		{"#hashtag\n", "paragraph"},
		{"# C#\n", "heading"},
		{"####### seven\n", "paragraph"},
		{"```\n# open fence to the end\n", "code"},
		{"text\n# heading\nmore\n", "paragraph heading paragraph"},
		{"para\n---\n", "heading"},
		{"- a\n```\n# h\n```\n", "list code"},
		{"- a\n  ```\n# h\n  ```\n", "list"},
		{"a | b\n--|--\n", "table"},
		{"a | b\n-- | -- | --\n", "paragraph"},
		{"\r\n# crlf\r\ntext\r\n", "heading paragraph"},
		{"    # indented code\n", "code"},
	}
	for _, tt := range tests {
		var kinds []string
		for _, b := range ParseBlocks(tt.doc) {
			kinds = append(kinds, string(b.Kind))
		}
		if got := strings.Join(kinds, " "); got != tt.kinds {
			t.Errorf("ParseBlocks(%q) kinds = %q, want %q", tt.doc, got, tt.kinds)
		}
	}
	if b := ParseBlocks("# C#\n"); b[0].Heading != "C#" {
		t.Errorf("heading = %q", b[0].Heading)
	}
	if b := ParseBlocks("## Done ##\n"); b[0].Heading != "Done" {
		t.Errorf("heading = %q", b[0].Heading)
	}
}

func TestSection(t *testing.T) {
	t.Parallel()
	text, start, end, ok := Section(sampleDoc, "intro / SETUP")
	if !ok || start != 7 || end != 30 {
		t.Fatalf("Section = %d-%d %v", start, end, ok)
	}
	if !strings.HasPrefix(text, "## Setup\n") || !strings.HasSuffix(text, "### Deep\ntext") {
		t.Errorf("text = %q", text)
	}
	if _, start, end, ok = Section(sampleDoc, "Intro"); !ok || start != 4 || end != 31 {
		t.Errorf("Intro = %d-%d %v", start, end, ok)
	}
	if _, start, _, ok = Section(sampleDoc, "Deep"); !ok || start != 29 {
		t.Errorf("suffix match Deep = %d %v", start, ok)
	}
	if _, start, end, ok = Section(sampleDoc, "title two"); !ok || start != 32 || end != 35 {
		t.Errorf("Title Two = %d-%d %v", start, end, ok)
	}
	for _, missing := range []string{"", "Nope", "Setup/Intro", "not a heading", "quoted heading", "tup"} {
		if _, _, _, ok := Section(sampleDoc, missing); ok {
			t.Errorf("Section(%q) found", missing)
		}
	}
}

// checkBlocks verifies the parser's invariants on doc.
func checkBlocks(doc string) error {
	n := len(splitLines(doc))
	prev := 0
	for i, b := range ParseBlocks(doc) {
		if b.StartLine < 1 || b.EndLine > n || b.StartLine > b.EndLine {
			return fmt.Errorf("block %d range %d-%d outside 1-%d", i, b.StartLine, b.EndLine, n)
		}
		if b.StartLine <= prev {
			return fmt.Errorf("block %d starts at %d, previous ended at %d", i, b.StartLine, prev)
		}
		prev = b.EndLine
		if (b.Kind == BlockHeading) != (b.Level > 0) || b.Level > 6 {
			return fmt.Errorf("block %d kind %s level %d", i, b.Kind, b.Level)
		}
		// A heading whose path is empty ("#" alone) cannot be addressed.
		if b.Kind == BlockHeading && normalizeHeadingPath(b.Path) != "" {
			_, start, end, ok := Section(doc, b.Path)
			if !ok || start > b.StartLine || end < start || end > n {
				return fmt.Errorf("Section(%q) = %d-%d %v for heading at %d", b.Path, start, end, ok, b.StartLine)
			}
		}
	}
	return nil
}

func FuzzParseBlocks(f *testing.F) {
	for _, s := range []string{
		sampleDoc, "", "# a\n## b\n### c\n# d", "```\n# x\n", "- a\n\n  b\n\n- c", "a|b\n-|-\n1|2",
		"---\nx: 1\n", "> q\n# h", "text\n===\n", "\t# tab\n", "- ```\n# in\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if err := checkBlocks(doc); err != nil {
			t.Fatal(err)
		}
	})
}
