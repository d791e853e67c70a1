package services_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestParsePinAndManifest: the forms /pin takes, and what a manifest
// refuses, each naming the problem.
func TestParsePinAndManifest(t *testing.T) {
	for in, want := range map[string]string{
		"notes.md":                  "notes.md",
		" notes.md#Goals/This week": "notes.md#Goals/This week",
		"plan.md:12-30":             "plan.md:12-30",
		"dir/a:b.md":                "dir/a:b.md",
	} {
		p, err := services.ParsePin(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePin(%q) = %q, %v; want %q", in, p.String(), err, want)
		}
	}
	for in, want := range map[string]string{
		"notes.md#":     "section after # is empty",
		"plan.md:30-12": "first ≤ last",
		"plan.md:a-b":   "line numbers",
		"/etc/passwd":   "relative",
		"../x.md":       "leaves the workspace",
		"":              "empty",
	} {
		if _, err := services.ParsePin(in); err == nil || !strings.Contains(services.ErrorMessage(err), want) {
			t.Errorf("ParsePin(%q): %v; want %q", in, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"version":1,"pins":[{"path":"a.md"},{"path":"a.md"}]}`:                 "listed twice",
		`{"version":1,"pins":[{"path":"a.md","block":"X","lines":[1,2]}]}`:       "not both",
		`{"version":1,"pins":[{"path":"a.md","lines":[1]}]}`:                     "[first, last]",
		`{"version":-1,"pins":[]}`:                                               "version",
		`{"version":1,"pins":[{"path":"a.md","colour":"red"}]}`:                  "colour",
		`{"version":1,"pins":[]} {}`:                                             "after the JSON object",
		`{"version":"one","pins":[]}`:                                            "version",
		`{"version":1,"pins":[{"path":"a.md"}],"pins2":[]}`:                      "pins2",
		`{"version":1,"pins":[{"path":"a.md","lines":[0,3]}]}`:                   "1 ≤ first",
		`{"version":1,"pins":[{"path":"C:/a.md"}]}`:                              "relative",
		`{"version":1,"pins":[{"path":"a.md","block":" / "}]}`:                   "empty heading",
		`{"version":1,"pins":[{"path":"a.md"},{"path":"a.md#","block":"x"},{}]}`: "empty \"path\"",
	} {
		_, err := services.ParseContextManifest([]byte(in))
		if err == nil || !strings.Contains(services.ErrorMessage(err), want) || services.ErrorCode(err) != services.CodeManifestInvalid {
			t.Errorf("ParseContextManifest(%s): %v; want %q", in, err, want)
		}
	}
}
