package agent

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestWatchVerdict: a watch fire's JSON verdict decides news; an answer
// that is not the JSON asked for is news unless it says NOTHING_NEW.
func TestWatchVerdict(t *testing.T) {
	for _, c := range []struct {
		answer string
		news   bool
		msg    string
	}{
		{`{"news": true, "message": "Tickets are out"}`, true, "Tickets are out"},
		{"```json\n{\"news\": false, \"message\": \"Only the layout changed\"}\n```", false, services.NothingNew},
		{`{"news": true, "message": ""}`, false, services.NothingNew},
		{`Sure: {"news":true,"message":"Price fell to 9 EUR"}`, true, "Price fell to 9 EUR"},
		{"NOTHING_NEW.", false, services.NothingNew},
		{"", false, services.NothingNew},
		{"Tickets are available now", true, "Tickets are available now"},
	} {
		news, msg := watchVerdict(c.answer)
		if news != c.news || msg != c.msg {
			t.Errorf("%q: %v %q, want %v %q", c.answer, news, msg, c.news, c.msg)
		}
	}
}

// TestLineDiff: the changed lines, removed then added, without the
// unchanged ones.
func TestLineDiff(t *testing.T) {
	old := "Box office\nNo tickets yet.\nOpen 9-5\nCall us"
	new := "Box office\nTickets available.\nOpen 9-5\nCall us\nNew: matinee"
	want := "- No tickets yet.\n+ Tickets available.\n+ New: matinee"
	if got := lineDiff(old, new); got != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", got, want)
	}
	if got := lineDiff("", "a\nb"); got != "+ a\n+ b" {
		t.Fatalf("from nothing: %q", got)
	}
	// Past the table's bound: all removed, then all added.
	big := func(p string) string {
		var b strings.Builder
		for i := range 600 {
			b.WriteString(p + string(rune('a'+i%26)) + "\n")
		}
		return b.String()
	}
	if got := lineDiff(big("x"), big("y")); strings.Count(got, "\n- ") != 599 || strings.Count(got, "\n+ ") != 600 {
		t.Fatalf("a large diff: %d removed, %d added", strings.Count(got, "\n- ")+1, strings.Count(got, "\n+ "))
	}
}
