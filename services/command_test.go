package services

import "testing"

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
