// Package fetch gives the agent the fetch_url tool: it GETs a page and
// returns readable text (HTML as Markdown, JSON indented, plain text as
// is), within byte, time and redirect limits, and refuses to reach
// loopback, private, link-local, metadata and other internal addresses
// unless the operator allows them. The check is made on the address
// actually dialled, so neither a DNS name that resolves to an internal
// address (DNS rebinding) nor a redirect can get around it.
package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// Error codes of fetch_url.
const (
	CodeRefused     = "FETCH_REFUSED"     // the address or scheme is not allowed
	CodeUnsupported = "FETCH_UNSUPPORTED" // a content type it does not read
	CodeFailed      = "FETCH_FAILED"      // the server could not be reached or answered an error status
	CodeTooMany     = "FETCH_TOO_MANY_REDIRECTS"
)

// Options bound fetch_url.
type Options struct {
	// Allow lists addresses, CIDR ranges and host names (resolved when the
	// service starts) that may be fetched even though they are internal (a
	// NAS, a local test page).
	Allow []string
	// MaxBytes bounds the body read (default 2 MiB); MaxChars the text
	// returned (default 40,000).
	MaxBytes int64
	MaxChars int
	// Timeout bounds the whole fetch, redirects included (default 20 s).
	Timeout time.Duration
	// MaxRedirects (default 5).
	MaxRedirects int
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 2 << 20
	}
	if o.MaxChars <= 0 {
		o.MaxChars = 40_000
	}
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 5
	}
	return o
}

// Register adds fetch_url to reg.
func Register(reg *tools.Registry, o Options) error {
	f, err := New(o)
	if err != nil {
		return err
	}
	return reg.Register(tools.Func("fetch_url", services.EffectEgress,
		"Fetch a web page or a JSON/text document by URL (http or https) and return its readable text: HTML as Markdown, "+
			"JSON indented. Internal network addresses are refused. Use it to look things up or to check a page for changes.",
		f.call).WithHistory(tools.HistoryRule{MaxChars: 1500, KeepFields: []string{"url", "status", "content_type", "title", "truncated", "content"}}))
}

type fetchArgs struct {
	URL string `json:"url" jsonschema:"The http or https URL to fetch."`
	// MaxChars lets the model ask for less text than the default.
	MaxChars int `json:"max_chars,omitempty" jsonschema:"At most this many characters of text (default and maximum: the service's limit)."`
}

// Result is what fetch_url returns.
type Result struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Title       string `json:"title,omitempty"`
	Content     string `json:"content"`
	Truncated   bool   `json:"truncated,omitempty"`
}

// Fetcher fetches pages within its Options.
type Fetcher struct {
	o      Options
	ranges []netip.Prefix
	client *http.Client
}

// New returns a Fetcher; EINVALID names a bad Allow entry.
func New(o Options) (*Fetcher, error) {
	o = o.withDefaults()
	f := &Fetcher{o: o}
	for _, a := range o.Allow {
		a = strings.TrimSpace(strings.ToLower(a))
		switch {
		case a == "":
		case strings.Contains(a, "/"):
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return nil, services.Errorf(services.EINVALID, "fetch allow list: %q is not a CIDR range: %v", a, err)
			}
			f.ranges = append(f.ranges, p.Masked())
		default:
			addrs := []string{a}
			if _, err := netip.ParseAddr(a); err != nil {
				if addrs, err = net.LookupHost(a); err != nil {
					return nil, services.Errorf(services.EINVALID, "fetch allow list: %q is not an address, a CIDR range or a name that resolves: %v", a, err)
				}
			}
			for _, s := range addrs {
				if ip, err := netip.ParseAddr(s); err == nil {
					f.ranges = append(f.ranges, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				}
			}
		}
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: f.control}
	transport := &http.Transport{
		DialContext:         dialer.DialContext,
		Proxy:               nil, // a proxy would dial on our behalf, unchecked
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
	}
	f.client = &http.Client{Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > o.MaxRedirects {
			return services.CodedErrorf(services.EINVALID, CodeTooMany, "more than %d redirects", o.MaxRedirects)
		}
		return checkScheme(req.URL)
	}}
	return f, nil
}

// control runs on the address about to be dialled (after DNS): internal
// addresses are refused unless allowed, by address or by the host name the
// request was made for.
func (f *Fetcher) control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	ip = ip.Unmap()
	for _, a := range classified(ip) {
		if why := internal(a); why != "" && !f.allowedIP(a) {
			if a != ip {
				why = fmt.Sprintf("an IPv6 form of %s, %s", a, why)
			}
			return &refusedError{fmt.Sprintf("%s is %s; internal addresses are not fetched (FETCH_ALLOW lets the operator open one)", ip, why)}
		}
	}
	return nil
}

var (
	ipv4Compat = netip.MustParsePrefix("::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
)

// classified returns the addresses an address is judged by: itself, or for
// an IPv6 address that embeds an IPv4 address (IPv4-compatible ::/96, NAT64
// 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32: its
// server and its client) the IPv4 addresses it leads to, since a packet
// sent there reaches them. IPv4-mapped addresses are unmapped before.
func classified(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return []netip.Addr{ip}
	}
	b := ip.As16()
	v4 := func(p []byte) netip.Addr { return netip.AddrFrom4([4]byte(p)) }
	switch {
	case ipv4Compat.Contains(ip):
		if ip.IsLoopback() || ip.IsUnspecified() {
			return []netip.Addr{ip}
		}
		return []netip.Addr{v4(b[12:16])}
	case nat64.Contains(ip):
		return []netip.Addr{v4(b[12:16])}
	case nat64Local.Contains(ip):
		// RFC 8215: the IPv4 address sits in the last 32 bits for a /96.
		return []netip.Addr{ip, v4(b[12:16])}
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(b[2:6])}
	case teredo.Contains(ip):
		client := [4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}
		return []netip.Addr{v4(b[4:8]), netip.AddrFrom4(client)}
	}
	return []netip.Addr{ip}
}

func (f *Fetcher) allowedIP(ip netip.Addr) bool {
	for _, p := range f.ranges {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10")
	benchmark = netip.MustParsePrefix("198.18.0.0/15")
	thisNet   = netip.MustParsePrefix("0.0.0.0/8")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
)

// internal says why ip is not a public address ("" if it is).
func internal(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address (cloud metadata services live there)"
	case ip.IsUnspecified(), thisNet.Contains(ip):
		return "an unspecified address"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "a multicast address"
	case cgnat.Contains(ip):
		return "a shared (carrier-grade NAT) address"
	case benchmark.Contains(ip):
		return "a benchmarking address"
	case nat64Local.Contains(ip):
		return "a local-use NAT64 address"
	}
	return ""
}

func checkScheme(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return services.CodedErrorf(services.EINVALID, CodeRefused, "only http and https URLs are fetched, not %q", u.Scheme)
	}
	return nil
}

func (f *Fetcher) call(ctx context.Context, _ tools.Call, a fetchArgs) (tools.Result, error) {
	res, err := f.Fetch(ctx, a.URL, a.MaxChars)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.JSONResult(res)
}

// Fetch gets rawURL and returns its readable text, at most maxChars
// characters (0: the limit).
func (f *Fetcher) Fetch(ctx context.Context, rawURL string, maxChars int) (Result, error) {
	if maxChars <= 0 || maxChars > f.o.MaxChars {
		maxChars = f.o.MaxChars
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	defer cancel()
	out, kind, body, err := f.get(ctx, rawURL)
	if err != nil {
		return Result{}, err
	}
	if kind == "html" {
		out.Title = title(body)
	}
	text, err := readable(out.URL, kind, body)
	if err != nil {
		return Result{}, err
	}
	if utf8.RuneCountInString(text) > maxChars {
		text, out.Truncated = string([]rune(text)[:maxChars]), true
	}
	out.Content = text
	return out, nil
}

// get GETs rawURL through the guard and returns the page's kind ("html",
// "json", "text") and body, within the byte limit.
func (f *Fetcher) get(ctx context.Context, rawURL string) (Result, string, []byte, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err == nil && u.Scheme != "" {
		if err := checkScheme(u); err != nil {
			return Result{}, "", nil, err
		}
	}
	if err != nil || u.Host == "" {
		return Result{}, "", nil, services.CodedErrorf(services.EINVALID, tools.CodeBadArguments, "argument \"url\": %q is not an absolute http or https URL", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{}, "", nil, services.CodedErrorf(services.EINVALID, tools.CodeBadArguments, "argument \"url\": %v", err)
	}
	req.Header.Set("User-Agent", "Switchboard-fetch/1 (+an owner's assistant)")
	req.Header.Set("Accept", "text/html, application/json;q=0.9, text/plain;q=0.8, */*;q=0.1")
	resp, err := f.client.Do(req)
	if err != nil {
		return Result{}, "", nil, f.explain(ctx, err)
	}
	defer resp.Body.Close()
	ct, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct == "" {
		ct = "text/plain"
	}
	out := Result{URL: resp.Request.URL.String(), Status: resp.StatusCode, ContentType: ct}
	if resp.StatusCode >= 400 {
		return Result{}, "", nil, services.CodedErrorf(services.EUNAVAILABLE, CodeFailed, "%s answered HTTP %d %s", out.URL, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	kind := kindOf(ct)
	if kind == "" {
		return Result{}, "", nil, services.CodedErrorf(services.EINVALID, CodeUnsupported,
			"%s is %s; fetch_url reads HTML, JSON and text only", out.URL, ct)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.o.MaxBytes+1))
	if err != nil {
		return Result{}, "", nil, f.explain(ctx, err)
	}
	if int64(len(body)) > f.o.MaxBytes {
		body, out.Truncated = body[:f.o.MaxBytes], true
	}
	if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "utf8" && cs != "us-ascii" {
		// Only UTF-8 is decoded; other charsets keep their ASCII.
		body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	return out, kind, body, nil
}

// readable is a body's readable text: HTML as Markdown, JSON indented,
// text as is.
func readable(from, kind string, body []byte) (string, error) {
	text := ""
	switch kind {
	case "html":
		md, err := htmltomarkdown.ConvertString(string(body))
		if err != nil {
			return "", services.CodedErrorf(services.EINVALID, CodeUnsupported, "%s could not be read as HTML: %v", from, err)
		}
		text = md
	case "json":
		var buf bytes.Buffer
		if json.Indent(&buf, body, "", "  ") == nil {
			text = buf.String()
		} else {
			text = string(body)
		}
	default:
		text = string(body)
	}
	return strings.ToValidUTF8(strings.TrimSpace(text), "\uFFFD"), nil
}

func kindOf(ct string) string {
	switch {
	case ct == "text/html" || ct == "application/xhtml+xml":
		return "html"
	case ct == "application/json" || strings.HasSuffix(ct, "+json"):
		return "json"
	case strings.HasPrefix(ct, "text/"), ct == "application/xml", strings.HasSuffix(ct, "+xml"):
		return "text"
	}
	return ""
}

// explain turns a transport failure into an error the model can act on.
func (f *Fetcher) explain(ctx context.Context, err error) error {
	var refused *refusedError
	var coded *services.Error
	switch {
	case errors.As(err, &refused):
		return services.CodedErrorf(services.EINVALID, CodeRefused, "%s", refused.msg)
	case errors.As(err, &coded):
		return coded
	}
	var ne net.Error
	if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return services.CodedErrorf(services.EUNAVAILABLE, tools.CodeTimeout, "the page did not load within %s", f.o.Timeout)
	}
	return services.CodedErrorf(services.EUNAVAILABLE, CodeFailed, "could not fetch: %v", err)
}

// title is the text of the page's <title>, if it has one.
func title(body []byte) string {
	lower := bytes.ToLower(body)
	i := bytes.Index(lower, []byte("<title"))
	if i < 0 {
		return ""
	}
	j := bytes.IndexByte(lower[i:], '>')
	k := bytes.Index(lower[i:], []byte("</title>"))
	if j < 0 || k < 0 || k < j {
		return ""
	}
	t := strings.Join(strings.Fields(string(body[i+j+1:i+k])), " ")
	if len(t) > 200 {
		t = t[:200]
	}
	return t
}
