package fetch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestReadWatchNormalises: a watch reads the selected part of a page as
// readable text, keeps a pattern's matches, drops the ignore patterns'
// matches and spacing differences, and hashes the result: a page whose
// counter and timestamp change hashes the same; a change in the part that
// matters does not. Outside the selected part nothing counts.
func TestReadWatchNormalises(t *testing.T) {
	var n atomic.Int64
	var price atomic.Value
	price.Store("12.00")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><nav>Visitors: %d</nav>
			<div id="offer">  Price:   <b>%s EUR</b>
			<p>Checked %d seconds ago</p></div><footer>%d</footer></body></html>`, i*7, price.Load(), i, i)
	}))
	t.Cleanup(srv.Close)
	f, err := New(Options{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := services.Watch{URL: srv.URL, Selector: "#offer", Ignore: []string{`Checked \d+ seconds ago`}}
	a, err := f.ReadWatch(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if a.Text != "Price: **12.00 EUR**" || len(a.Hash) != 64 {
		t.Fatalf("content %q hash %q", a.Text, a.Hash)
	}
	b, _ := f.ReadWatch(ctx, w)
	if b.Hash != a.Hash {
		t.Fatalf("counter and timestamp changed the hash: %q vs %q", a.Text, b.Text)
	}
	price.Store("9.00")
	c, _ := f.ReadWatch(ctx, w)
	if c.Hash == a.Hash || !strings.Contains(c.Text, "9.00 EUR") {
		t.Fatalf("a new price kept the hash: %q", c.Text)
	}
	// A pattern keeps only its matches.
	p, err := f.ReadWatch(ctx, services.Watch{URL: srv.URL, Pattern: `\d+\.\d\d EUR`})
	if err != nil || p.Text != "9.00 EUR" {
		t.Fatalf("pattern: %q %v", p.Text, err)
	}
	// A selector that matches nothing is an error that names it.
	if _, err := f.ReadWatch(ctx, services.Watch{URL: srv.URL, Selector: "#gone"}); code(t, err) != CodeWatchEmpty || !strings.Contains(err.Error(), `"#gone" matches nothing`) {
		t.Fatalf("empty selection: %v", err)
	}
	// The fetch guard holds: loopback without the operator's allowance.
	closed, _ := New(Options{})
	if _, err := closed.ReadWatch(ctx, w); code(t, err) != CodeRefused {
		t.Fatalf("loopback watch: %v", err)
	}
}

// TestValidateWatch names the bad part of a watch.
func TestValidateWatch(t *testing.T) {
	f, _ := New(Options{})
	for _, c := range []struct {
		w    services.Watch
		want string
	}{
		{services.Watch{URL: "ftp://example.org/x"}, `watch.url "ftp://example.org/x" is not an absolute http or https URL`},
		{services.Watch{URL: "/relative"}, "not an absolute"},
		{services.Watch{URL: "https://example.org", Selector: "div[["}, `watch.selector "div[[" is not a CSS selector`},
		{services.Watch{URL: "https://example.org", Pattern: "(unclosed"}, `watch.pattern "(unclosed" is not a regular expression`},
		{services.Watch{URL: "https://example.org", Ignore: []string{"a", "*b"}}, `watch.ignore "*b" is not a regular expression`},
		{services.Watch{URL: "https://example.org", Ignore: []string{" "}}, "watch.ignore has an empty pattern"},
		{services.Watch{URL: "https://example.org", Tool: "shop__stock"}, "give watch.url or watch.tool, not both"},
		{services.Watch{Tool: "shop__stock", Arguments: []byte(`[1]`)}, "watch.arguments is not a JSON object"},
		{services.Watch{Tool: "shop__stock", Selector: "#x"}, "watch.selector is for a page"},
		{services.Watch{Pattern: "x"}, "watch.url is missing"},
	} {
		err := f.ValidateWatch(c.w)
		if !services.IsKind(err, services.EINVALID) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.w, err, c.want)
		}
	}
	if err := f.ValidateWatch(services.Watch{URL: "https://example.org/a", Selector: "table.prices td:nth-child(2)", Pattern: `\d+`, Ignore: []string{`\d\d:\d\d`}}); err != nil {
		t.Fatalf("a good watch: %v", err)
	}
	if err := f.ValidateWatch(services.Watch{Tool: "shop__stock", Arguments: []byte(`{"item":"lamp"}`), Pattern: `\d+ in stock`}); err != nil {
		t.Fatalf("a good tool watch: %v", err)
	}
}
