package markdown

import (
	"slices"
	"strings"
	"testing"
)

func TestParseAtPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"look at @some/path.md and @file.go", []string{"some/path.md", "file.go"}},
		{"see @docs/setup.md.", []string{"docs/setup.md"}},
		{"(@a.go), @b.go; @c.go!", []string{"a.go", "b.go", "c.go"}},
		{"@a.go @b.go @a.go", []string{"a.go", "b.go"}},
		{"mail me at a@b.com", nil},
		{"https://medium.com/@user/post.html", nil},
		{"ping @alice and @switchboard_bot", nil},
		{"run `cat @x.md` then read @y.md", []string{"y.md"}},
		{"```\n@in/fence.md\n```\n@out.md", []string{"out.md"}},
		{"~~~\n@in/fence.md\n", nil},
		{"@../secret.txt @/etc/passwd @./Makefile", []string{"./Makefile"}},
		{"@... @./ @-.", nil},
		{"@@double.md x@@y.md", nil},
		{"中文 @文件.md @src/main.go。", []string{"src/main.go"}},
		{"unmatched ` backtick @a.md", []string{"a.md"}},
		{"in a reference [@a.md#Intro]", []string{"a.md"}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := ParseAtPaths(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseAtPaths(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAtPathReminder(t *testing.T) {
	t.Parallel()
	if got := AtPathReminder(nil); got != "" {
		t.Errorf("AtPathReminder(nil) = %q", got)
	}
	one := AtPathReminder([]string{"src/utils/auth.ts"})
	want := "<system-reminder>\nThe user mentioned @src/utils/auth.ts.\nYou MUST read this file with the read_file tool before answering.\n</system-reminder>"
	if one != want {
		t.Errorf("one path:\n%s\nwant:\n%s", one, want)
	}
	seven := AtPathReminder([]string{"a.md", "b.md", "c.md", "d.md", "e.md", "f.md", "g.md"})
	if !strings.Contains(seven, "@a.md, @b.md, @c.md, @d.md, @e.md (and 2 more…).") {
		t.Errorf("seven paths: %s", seven)
	}
	if strings.Contains(seven, "@f.md") || !strings.Contains(seven, "these files") {
		t.Errorf("seven paths: %s", seven)
	}
	if got := WithAtPathReminder("no mentions"); got != "no mentions" {
		t.Errorf("WithAtPathReminder changed plain input: %q", got)
	}
	if got := WithAtPathReminder("read @a.md"); !strings.HasPrefix(got, "read @a.md\n\n<system-reminder>") {
		t.Errorf("WithAtPathReminder = %q", got)
	}
}

func FuzzParseAtPaths(f *testing.F) {
	for _, s := range []string{
		"look at @some/path.md and @file.go", "a@b.com", "`@x.md` @y.md", "```\n@a.md\n```",
		"@a.md @b.md @c.md @d.md @e.md @f.md @a.md", "@../x.md", "``@a.md`` ` @b.md", "@.", "@/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		paths := ParseAtPaths(in)
		seen := map[string]bool{}
		for _, p := range paths {
			if seen[p] {
				t.Fatalf("duplicate %q in %q", p, paths)
			}
			seen[p] = true
			if !strings.Contains(in, "@"+p) {
				t.Fatalf("path %q not in input", p)
			}
			if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, ".") || slices.Contains(strings.Split(p, "/"), "..") {
				t.Fatalf("bad path %q", p)
			}
			for i := 0; i < len(p); i++ {
				if !isPathByte(p[i]) {
					t.Fatalf("path %q has byte %q", p, p[i])
				}
			}
		}
		r := AtPathReminder(paths)
		if (r == "") != (len(paths) == 0) {
			t.Fatalf("reminder %q for %d paths", r, len(paths))
		}
		named := strings.Count(r, " @")
		if named > MaxAtPaths {
			t.Fatalf("reminder names %d paths: %q", named, r)
		}
		if len(paths) > MaxAtPaths && !strings.Contains(r, "more…)") {
			t.Fatalf("reminder for %d paths lacks the more marker", len(paths))
		}
	})
}
