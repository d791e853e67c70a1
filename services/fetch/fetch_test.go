package fetch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

func site(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title> Concert  tickets </title><script>var x=1</script></head><body>
			<h1>Tickets</h1><p>Status: <b>Tickets available</b> from <a href="/buy">the shop</a>.</p><ul><li>one</li><li>two</li></ul></body></html>`)
	})
	mux.HandleFunc("/data", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"tickets":3,"open":true}`)
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("word ", 100_000))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func code(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("want an error")
	}
	return services.ErrorCode(err)
}

// TestInternalAddressesAreRefused: loopback, private, link-local (cloud
// metadata) and unspecified addresses are refused by default, also behind
// a DNS name ("localhost") and behind a redirect; the operator's allow
// list opens one.
func TestInternalAddressesAreRefused(t *testing.T) {
	t.Parallel()
	s := site(t)
	port := s.Listener.Addr().(*net.TCPAddr).Port
	f, _ := New(Options{})
	for _, u := range []string{s.URL + "/page", fmt.Sprintf("http://localhost:%d/page", port), "http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/",
		"http://[::1]:1/", "http://0.0.0.0:1/", "http://192.168.1.1/"} {
		_, err := f.Fetch(context.Background(), u, 0)
		if code(t, err) != CodeRefused || !strings.Contains(err.Error(), "internal addresses are not fetched") {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"file:///etc/passwd", "ftp://example.test/x", "gopher://x/"} {
		if _, err := f.Fetch(context.Background(), u, 0); code(t, err) != CodeRefused {
			t.Errorf("%s: %v", u, err)
		}
	}
	// Allowed: the test site, but a redirect from it to the metadata address is not.
	open, err := New(Options{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Fetch(context.Background(), s.URL+"/page", 0); err != nil {
		t.Fatalf("allowed address: %v", err)
	}
	if _, err := open.Fetch(context.Background(), s.URL+"/to-metadata", 0); code(t, err) != CodeRefused {
		t.Fatalf("redirect to the metadata address: %v", err)
	}
	if _, err := New(Options{Allow: []string{"10.0.0.0/33"}}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("bad CIDR in the allow list: %v", err)
	}
}

// TestReadableText: HTML becomes Markdown (no script), JSON is indented,
// other types are refused, limits hold, errors name what happened.
func TestReadableText(t *testing.T) {
	t.Parallel()
	s := site(t)
	f, err := New(Options{Allow: []string{"127.0.0.0/8"}, MaxBytes: 64 << 10, Timeout: 2 * time.Second, MaxChars: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := f.Fetch(ctx, s.URL+"/page", 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Title != "Concert tickets" || !strings.Contains(res.Content, "# Tickets") || !strings.Contains(res.Content, "**Tickets available**") ||
		!strings.Contains(res.Content, "[the shop](/buy)") || !strings.Contains(res.Content, "- one") || strings.Contains(res.Content, "var x") {
		t.Fatalf("page as Markdown: %+v", res)
	}
	if res, err := f.Fetch(ctx, s.URL+"/data", 0); err != nil || !strings.Contains(res.Content, "\"tickets\": 3") {
		t.Fatalf("JSON: %+v %v", res, err)
	}
	if _, err := f.Fetch(ctx, s.URL+"/image", 0); code(t, err) != CodeUnsupported {
		t.Fatalf("image: %v", err)
	}
	if res, err := f.Fetch(ctx, s.URL+"/big", 0); err != nil || !res.Truncated || len([]rune(res.Content)) != 1000 {
		t.Fatalf("big page: truncated=%v, %d characters, %v", res.Truncated, len(res.Content), err)
	}
	if _, err := f.Fetch(ctx, s.URL+"/slow", 0); code(t, err) != tools.CodeTimeout {
		t.Fatalf("slow page: %v", err)
	}
	if _, err := f.Fetch(ctx, s.URL+"/loop", 0); code(t, err) != CodeTooMany {
		t.Fatalf("redirect loop: %v", err)
	}
	if _, err := f.Fetch(ctx, s.URL+"/missing", 0); code(t, err) != CodeFailed || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing page: %v", err)
	}
	if _, err := f.Fetch(ctx, "not a url", 0); code(t, err) != tools.CodeBadArguments {
		t.Fatalf("bad URL: %v", err)
	}
}

// TestTheTool: fetch_url through the registry, as the model calls it.
func TestTheTool(t *testing.T) {
	t.Parallel()
	s := site(t)
	reg := tools.NewRegistry(nil)
	if err := Register(reg, Options{Allow: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	res := reg.Execute(context.Background(), "fetch_url", tools.Call{Arguments: []byte(`{"url":"` + s.URL + `/page"}`)})
	if res.IsError || !strings.Contains(res.Content, "Tickets available") || !strings.Contains(res.Content, `"status":200`) {
		t.Fatalf("fetch_url: %+v", res)
	}
	res = reg.Execute(context.Background(), "fetch_url", tools.Call{Arguments: []byte(`{"url":"http://169.254.169.254/"}`)})
	if !res.IsError || res.ErrorCode != CodeRefused {
		t.Fatalf("fetch_url of the metadata address: %+v", res)
	}
}

// TestEmbeddedIPv4IsJudgedByItsAddress: every IPv6 form that embeds an
// IPv4 address is refused when that address is internal, and fetched when
// it is public.
func TestEmbeddedIPv4IsJudgedByItsAddress(t *testing.T) {
	f, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for addr, refused := range map[string]bool{
		"::127.0.0.1":               true,  // IPv4-compatible
		"::10.0.0.1":                true,  // IPv4-compatible
		"::169.254.169.254":         true,  // IPv4-compatible metadata
		"::8.8.8.8":                 false, // IPv4-compatible public
		"::ffff:127.0.0.1":          true,  // IPv4-mapped
		"::ffff:8.8.8.8":            false, // IPv4-mapped public
		"64:ff9b::7f00:1":           true,  // NAT64 of 127.0.0.1
		"64:ff9b::a9fe:a9fe":        true,  // NAT64 of 169.254.169.254
		"64:ff9b::808:808":          false, // NAT64 of 8.8.8.8
		"64:ff9b:1::7f00:1":         true,  // local-use NAT64
		"2002:7f00:1::1":            true,  // 6to4 of 127.0.0.1
		"2002:c0a8:1::1":            true,  // 6to4 of 192.168.0.1
		"2002:808:808::1":           false, // 6to4 of 8.8.8.8
		"2001:0:808:808::80ff:fffe": true,  // Teredo, client 127.0.0.1
		"2001:0:7f00:1::f7f7:f7f7":  true,  // Teredo, server 127.0.0.1
		"2001:0:808:808::f7f7:f7f7": false, // Teredo, server 8.8.8.8, client 8.8.8.8
		"::1":                       true,
		"2606:4700::1111":           false,
	} {
		err := f.control("tcp6", net.JoinHostPort(addr, "80"), nil)
		if got := err != nil; got != refused {
			t.Errorf("dial %s: refused=%v (%v), want refused=%v", addr, got, err, refused)
		}
	}
}

func TestInternalRanges(t *testing.T) {
	for addr, want := range map[string]bool{"8.8.8.8": false, "1.1.1.1": false, "2606:4700::1111": false,
		"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.0.1": true, "169.254.169.254": true,
		"100.64.0.1": true, "0.0.0.0": true, "::1": true, "fc00::1": true, "fe80::1": true, "::": true, "224.0.0.1": true} {
		if got := internal(netip.MustParseAddr(addr)) != ""; got != want {
			t.Errorf("internal(%s) = %v, want %v", addr, got, want)
		}
	}
}
