package services

import (
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	for in, want := range map[string]string{
		"/new":                  "new",
		"  /STATUS  ":           "status",
		"/compact keep the API": "compact",
		"/stop@switchboard_bot": "stop",
		"/unknown":              "unknown",
		"/etc/hosts is missing": "",
		"/ü":                    "",
		"hello /new":            "",
		"/":                     "",
		"//new":                 "",
	} {
		name, _, ok := ParseCommand(in)
		if name != want || ok != (want != "") {
			t.Errorf("ParseCommand(%q) = %q %v, want %q", in, name, ok, want)
		}
	}
	if _, args, _ := ParseCommand("/compact  keep the API "); args != "keep the API" {
		t.Errorf("args = %q", args)
	}
}

// FuzzParseCommand: whatever the text, a parsed command has a plain name
// (so an unknown one is answered "unknown command", never misread).
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/new", "/compact x y", "/stop@bot", "/", "", "/ü", "/status\n/new"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		name, _, ok := ParseCommand(in)
		if ok && !commandNameRE.MatchString(name) {
			t.Fatalf("ParseCommand(%q) accepted the command name %q", in, name)
		}
	})
}

// TestParseRuleAdd: "/rules add" takes the rule's text, or --check with a
// quoted text and a quoted Go regexp; a pattern that does not compile is
// refused with the regexp's complaint.
func TestParseRuleAdd(t *testing.T) {
	for _, c := range []struct{ args, text, check, err string }{
		{args: "Answer in French.", text: "Answer in French."},
		{args: `--check "no exclamation marks" '!'`, text: "no exclamation marks", check: "!"},
		{args: `--check 'never say "basically"' "(?i)\\bbasically\\b"`, text: `never say "basically"`, check: `(?i)\bbasically\b`},
		{args: `--check short '\d{16}'`, text: "short", check: `\d{16}`},
		{args: `--checklist of things`, text: "--checklist of things"},
		{args: `--check "no exclamation marks" '(unclosed'`, err: "not a valid regular expression: missing closing ): `(unclosed`"},
		{args: `--check "no exclamation marks"`, err: "got 1 arguments"},
		{args: `--check "no exclamation marks '!'`, err: "unclosed \" quote"},
		{args: `--check "" '!'`, err: "may not be empty"},
	} {
		text, check, err := ParseRuleAdd(c.args)
		if c.err != "" {
			if err == nil || !IsKind(err, EINVALID) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want EINVALID with %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || text != c.text || check != c.check {
			t.Errorf("%s: %q %q %v, want %q %q", c.args, text, check, err, c.text, c.check)
		}
	}
	if m, ok := RuleCheckMatch("!", "Great news!"); !ok || m != "!" {
		t.Fatalf("match %q %v", m, ok)
	}
	if _, ok := RuleCheckMatch("!", "Calm news."); ok {
		t.Fatal("matched text without the pattern")
	}
}
