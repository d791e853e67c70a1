package services

import "testing"

func TestParseCommand(t *testing.T) {
	for in, want := range map[string]string{
		"/new":                  "new",
		"  /STATUS  ":           "status",
		"/compact keep the API": "compact",
		"/stop@switchboard_bot": "stop",
		"/unknown":              "",
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

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/new", "/compact x y", "/stop@bot", "/", "", "/ü", "/status\n/new"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		name, _, ok := ParseCommand(in)
		if ok {
			found := false
			for _, c := range Commands {
				found = found || c == name
			}
			if !found {
				t.Fatalf("unknown command %q accepted", name)
			}
		}
	})
}
