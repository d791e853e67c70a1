package markdown

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func TestScanRefs(t *testing.T) {
	t.Parallel()
	text := "What does [guide.md:12:30] mean, and [src/main.go:7]? See [docs/a.md#Intro / Setup]. " +
		"Again [guide.md:12:30] and [./guide.md:12:30]. Not refs: [12:30], [x], [a.md](a.md), `[b.md:1]`, [#1], [a.md:1:2:3]. " +
		"Invalid: [a.md:0] [a.md:-3] [a.md:9:2] [a.md:99999999] [:4] [../etc/passwd:1] [/abs.md:1] [a.md#] [a.md:12345678901234567890]"
	refs, invalid := ScanRefs(text)
	want := []Ref{
		{Path: "guide.md", StartLine: 12, EndLine: 30, Raw: "[guide.md:12:30]"},
		{Path: "src/main.go", StartLine: 7, EndLine: 7, Raw: "[src/main.go:7]"},
		{Path: "docs/a.md", HeadingPath: "Intro/Setup", Raw: "[docs/a.md#Intro / Setup]"},
	}
	if len(refs) != len(want) {
		t.Fatalf("refs = %+v", refs)
	}
	for i := range want {
		if refs[i] != want[i] {
			t.Errorf("ref %d = %+v, want %+v", i, refs[i], want[i])
		}
	}
	wantInvalid := map[string]string{
		"[a.md:0]":                    "line numbers start at 1",
		"[a.md:-3]":                   "line numbers start at 1",
		"[a.md:9:2]":                  "end line 2 before start line 9",
		"[a.md:99999999]":             "line number above 10000000",
		"[:4]":                        "empty path",
		"[../etc/passwd:1]":           "path leaves the workspace (..)",
		"[/abs.md:1]":                 "absolute path",
		"[a.md#]":                     "empty heading",
		"[a.md:12345678901234567890]": "line number above 10000000",
	}
	if len(invalid) != len(wantInvalid) {
		t.Errorf("invalid = %+v", invalid)
	}
	for _, iv := range invalid {
		if wantInvalid[iv.Raw] != iv.Reason {
			t.Errorf("invalid %s: reason %q, want %q", iv.Raw, iv.Reason, wantInvalid[iv.Raw])
		}
	}
	if got := ParseRefs(text); len(got) != 3 {
		t.Errorf("ParseRefs = %+v", got)
	}
}

func TestRefValidate(t *testing.T) {
	t.Parallel()
	bad := []Ref{
		{},
		{Path: "a.md"},
		{Path: "a.md", StartLine: 3, EndLine: 2},
		{Path: `a\..\..\b.md`, StartLine: 1, EndLine: 1},
		{Path: "C:/x.md", StartLine: 1, EndLine: 1},
		{Path: "a.md", HeadingPath: "X", StartLine: 1, EndLine: 1},
		{Path: "a.md", StartLine: 1, EndLine: MaxRefLine + 1},
	}
	for _, r := range bad {
		if err := r.Validate(); !services.IsKind(err, services.EINVALID) {
			t.Errorf("Validate(%+v) = %v", r, err)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"guide.md": "line1\nline2\nline3\n",
		"doc.md":   "# Intro\nhi\n## Setup\nsteps\n# Next\n",
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	res, err := Resolve(Ref{Path: "guide.md", StartLine: 2, EndLine: 9}, read)
	if err != nil || res.Text != "line2\nline3" || res.EndLine != 3 || !res.Clamped || res.TotalLines != 3 {
		t.Errorf("clamped = %+v, %v", res, err)
	}
	res, err = Resolve(Ref{Path: "guide.md", StartLine: 1, EndLine: 1}, read)
	if err != nil || res.Text != "line1" || res.Clamped {
		t.Errorf("one line = %+v, %v", res, err)
	}
	res, err = Resolve(Ref{Path: "doc.md", HeadingPath: "intro/setup"}, read)
	if err != nil || res.Text != "## Setup\nsteps" || res.StartLine != 3 || res.EndLine != 4 {
		t.Errorf("section = %+v, %v", res, err)
	}
	_, err = Resolve(Ref{Path: "doc.md", HeadingPath: "Missing"}, read)
	if !services.IsKind(err, services.ENOTFOUND) || !strings.Contains(err.Error(), `"Missing"`) {
		t.Errorf("missing heading: %v", err)
	}
	_, err = Resolve(Ref{Path: "guide.md", StartLine: 4, EndLine: 4}, read)
	if !services.IsKind(err, services.EINVALID) || !strings.Contains(err.Error(), "3 lines") {
		t.Errorf("past the end: %v", err)
	}
	_, err = Resolve(Ref{Path: "nope.md", StartLine: 1, EndLine: 1}, read)
	if !services.IsKind(err, services.ENOTFOUND) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	denied := services.Errorf(services.EUNAUTHORIZED, "outside workspace")
	_, err = Resolve(Ref{Path: "x.md", StartLine: 1, EndLine: 1}, func(string) ([]byte, error) { return nil, denied })
	if !services.IsKind(err, services.EUNAUTHORIZED) {
		t.Errorf("readFile error kind lost: %v", err)
	}
	_, err = Resolve(Ref{Path: "../x.md", StartLine: 1, EndLine: 1}, func(string) ([]byte, error) {
		t.Fatal("readFile called for an invalid ref")
		return nil, nil
	})
	if !services.IsKind(err, services.EINVALID) {
		t.Errorf("invalid ref: %v", err)
	}
}

func FuzzParseRefs(f *testing.F) {
	for _, s := range []string{
		"[guide.md:12:30]", "[a.md:12]", "[a.md#Intro/Setup]", "[a.md:0] [a.md:9:2] [../x.md:1]",
		"`[a.md:1]` [b.md:2](x)", "[a.md:99999999999999999999]", "[[a.md:1]]", "[a.md#]", "[:1]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		refs, invalid := ScanRefs(text)
		for _, r := range refs {
			if err := r.Validate(); err != nil {
				t.Fatalf("returned invalid ref %+v: %v", r, err)
			}
			if r.StartLine > r.EndLine || r.EndLine > MaxRefLine {
				t.Fatalf("bad range %+v", r)
			}
			if (r.HeadingPath == "") == (r.StartLine == 0) {
				t.Fatalf("ref is neither lines nor section: %+v", r)
			}
			if !strings.Contains(text, r.Raw) {
				t.Fatalf("raw %q not in text", r.Raw)
			}
		}
		for _, iv := range invalid {
			if iv.Reason == "" || !strings.Contains(text, iv.Raw) {
				t.Fatalf("bad invalid entry %+v", iv)
			}
		}
	})
}
