package markdown

import (
	"slices"
	"testing"
)

// TestCodeHidesMentions: fenced code blocks (fence lines included; an
// unclosed fence runs to the end) and inline code spans (backticks
// included) hide mentions and references; the text around them does not.
func TestCodeHidesMentions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"a `@b.md` @c.md", []string{"c.md"}},
		{"``a ` @b.md`` `@c.md", []string{"c.md"}},
		{"` unmatched @a.md", []string{"a.md"}},
		{"x\n```go\n@y.md\n```\nz `@w.md` @v.md", []string{"v.md"}},
		{"~~~\nopen to the end @a.md", nil},
		{"```` \n```\nstill code @a.md\n````\n@b.md", []string{"b.md"}},
		{"``` not`@b.md fence``` @a.md", []string{"a.md"}},
	}
	for _, tt := range tests {
		if got := ParseAtPaths(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseAtPaths(%q) = %q, want %q", tt.in, got, tt.want)
		}
		refs := ParseRefs(replaceAt(tt.in))
		var got []string
		for _, r := range refs {
			got = append(got, r.Path)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ParseRefs(%q) = %q, want %q", replaceAt(tt.in), got, tt.want)
		}
	}
}

// replaceAt writes each "@x.md" mention of s as a reference "[x.md:1]".
func replaceAt(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '@' {
			out = append(out, s[i])
			continue
		}
		j := i + 1
		for j < len(s) && isPathByte(s[j]) {
			j++
		}
		out = append(out, "["+s[i+1:j]+":1]"...)
		i = j - 1
	}
	return string(out)
}
