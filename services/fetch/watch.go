package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"

	"github.com/switchboard/switchboard/services"
)

// CodeWatchEmpty: a watch's selector matched nothing on the page.
const CodeWatchEmpty = "WATCH_NOTHING_SELECTED"

// Bounds of a watch's parts.
const (
	maxWatchURL     = 2000
	maxWatchPattern = 500
)

var _ services.Watcher = (*Fetcher)(nil)

// ValidateWatch checks a watch: an absolute http(s) URL, a CSS selector
// that parses, patterns that compile (RE2). EINVALID names the part.
func (f *Fetcher) ValidateWatch(w services.Watch) error {
	_, _, err := compileWatch(w)
	return err
}

func compileWatch(w services.Watch) (cascadia.Sel, []*regexp.Regexp, error) {
	switch {
	case w.URL != "" && w.Tool != "":
		return nil, nil, services.Errorf(services.EINVALID, "give watch.url or watch.tool, not both")
	case w.Tool != "":
		if len(w.Tool) > 64 || strings.ContainsAny(w.Tool, " \n\t") {
			return nil, nil, services.Errorf(services.EINVALID, "watch.tool %q is not a tool name", w.Tool)
		}
		if a := strings.TrimSpace(string(w.Arguments)); a != "" && (!json.Valid([]byte(a)) || !strings.HasPrefix(a, "{")) {
			return nil, nil, services.Errorf(services.EINVALID, "watch.arguments is not a JSON object")
		}
		if strings.TrimSpace(w.Selector) != "" {
			return nil, nil, services.Errorf(services.EINVALID, "watch.selector is for a page; use watch.pattern on a tool's result")
		}
	default:
		u, err := url.Parse(strings.TrimSpace(w.URL))
		switch {
		case w.URL == "":
			return nil, nil, services.Errorf(services.EINVALID, "watch.url is missing: say which page to watch (or give watch.tool)")
		case len(w.URL) > maxWatchURL:
			return nil, nil, services.Errorf(services.EINVALID, "watch.url is %d bytes; the limit is %d", len(w.URL), maxWatchURL)
		case err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https":
			return nil, nil, services.Errorf(services.EINVALID, "watch.url %q is not an absolute http or https URL", w.URL)
		}
	}
	var sel cascadia.Sel
	var err error
	if s := strings.TrimSpace(w.Selector); s != "" {
		if len(s) > maxWatchPattern {
			return nil, nil, services.Errorf(services.EINVALID, "watch.selector is %d bytes; the limit is %d", len(s), maxWatchPattern)
		}
		if sel, err = cascadia.Parse(s); err != nil {
			return nil, nil, services.Errorf(services.EINVALID, "watch.selector %q is not a CSS selector: %v", s, err)
		}
	}
	var res []*regexp.Regexp
	for i, p := range append([]string{w.Pattern}, w.Ignore...) {
		name := "watch.pattern"
		if i > 0 {
			name = "watch.ignore"
		}
		if strings.TrimSpace(p) == "" {
			if i > 0 {
				return nil, nil, services.Errorf(services.EINVALID, "%s has an empty pattern", name)
			}
			res = append(res, nil)
			continue
		}
		if len(p) > maxWatchPattern {
			return nil, nil, services.Errorf(services.EINVALID, "%s pattern is %d bytes; the limit is %d", name, len(p), maxWatchPattern)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, nil, services.Errorf(services.EINVALID, "%s %q is not a regular expression: %v", name, p, err)
		}
		res = append(res, re)
	}
	return sel, res, nil
}

// ReadWatch fetches a watch's page through the guard (the same SSRF rules
// as fetch_url) and normalises it: the selected elements (all of the page
// without a selector) as readable text, the pattern's matches (one a
// line) when there is a pattern, the ignore patterns' matches removed,
// spacing collapsed and empty lines dropped. Hash is the SHA-256 of that
// text; Text is cut to the fetch limit.
func (f *Fetcher) ReadWatch(ctx context.Context, w services.Watch) (services.WatchContent, error) {
	sel, res, err := compileWatch(w)
	if err != nil {
		return services.WatchContent{}, err
	}
	if w.Tool != "" {
		return services.WatchContent{}, services.Errorf(services.EINVALID, "watch.tool %q is read by the agent, not fetched", w.Tool)
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	defer cancel()
	page, kind, body, err := f.get(ctx, w.URL)
	if err != nil {
		return services.WatchContent{}, err
	}
	if sel != nil {
		if kind != "html" {
			return services.WatchContent{}, services.CodedErrorf(services.EINVALID, CodeUnsupported, "%s is %s; a CSS selector needs an HTML page", page.URL, page.ContentType)
		}
		if body, err = selectHTML(body, sel); err != nil {
			return services.WatchContent{}, err
		}
		if len(body) == 0 {
			return services.WatchContent{}, services.CodedErrorf(services.EINVALID, CodeWatchEmpty, "watch.selector %q matches nothing on %s", w.Selector, page.URL)
		}
	}
	text, err := readable(page.URL, kind, body)
	if err != nil {
		return services.WatchContent{}, err
	}
	return f.content(page.URL, normaliseWatch(text, res[0], res[1:])), nil
}

// NormaliseWatch normalises a tool watch's result text as ReadWatch does a
// page's readable text (pattern, ignore patterns, spacing) and hashes it.
func (f *Fetcher) NormaliseWatch(w services.Watch, source, text string) (services.WatchContent, error) {
	_, res, err := compileWatch(w)
	if err != nil {
		return services.WatchContent{}, err
	}
	return f.content(source, normaliseWatch(strings.ToValidUTF8(text, "\uFFFD"), res[0], res[1:])), nil
}

// content hashes normalised text and bounds what is kept of it.
func (f *Fetcher) content(source, text string) services.WatchContent {
	sum := sha256.Sum256([]byte(text))
	out := services.WatchContent{URL: source, Text: text, Hash: hex.EncodeToString(sum[:])}
	if utf8.RuneCountInString(out.Text) > f.o.MaxChars {
		out.Text, out.Truncated = string([]rune(out.Text)[:f.o.MaxChars]), true
	}
	return out
}

// selectHTML renders the elements sel matches, in document order.
func selectHTML(body []byte, sel cascadia.Sel) ([]byte, error) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, services.Errorf(services.EINVALID, "the page could not be parsed as HTML: %v", err)
	}
	var out bytes.Buffer
	for _, n := range cascadia.QueryAll(doc, sel) {
		if err := html.Render(&out, n); err != nil {
			return nil, err
		}
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// normaliseWatch keeps pattern's matches (when there is a pattern),
// removes the ignore patterns' matches and collapses spacing: what is
// compared from one fire to the next.
func normaliseWatch(text string, pattern *regexp.Regexp, ignore []*regexp.Regexp) string {
	if pattern != nil {
		text = strings.Join(pattern.FindAllString(text, -1), "\n")
	}
	for _, re := range ignore {
		text = re.ReplaceAllString(text, "")
	}
	var lines []string
	for l := range strings.SplitSeq(text, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
