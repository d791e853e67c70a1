package markdown

import "testing"

func TestCodeSpans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		code []string // the code text, in order
	}{
		{"a `b` c", []string{"`b`"}},
		{"``a ` b`` `c", []string{"``a ` b``"}},
		{"` unmatched", nil},
		{"x\n```go\ny\n```\nz `w`", []string{"```go\ny\n```", "`w`"}},
		{"~~~\nopen to the end", []string{"~~~\nopen to the end"}},
		{"```` \n```\nstill code\n````", []string{"```` \n```\nstill code\n````"}},
		{"``` not`a fence```", []string{"``` not`a fence```"}},
	}
	for _, tt := range tests {
		spans := codeSpans(tt.in)
		if len(spans) != len(tt.code) {
			t.Errorf("codeSpans(%q) = %v, want %q", tt.in, spans, tt.code)
			continue
		}
		for i, s := range spans {
			if got := tt.in[s.start:s.end]; got != tt.code[i] {
				t.Errorf("codeSpans(%q)[%d] = %q, want %q", tt.in, i, got, tt.code[i])
			}
			if !inSpans(spans, s.start) || inSpans(spans, s.end) && (i+1 == len(spans) || spans[i+1].start != s.end) {
				t.Errorf("inSpans wrong at the edges of %v", s)
			}
		}
	}
}
