package fetch

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// CodeSearchFailed: the search engine could not be reached or refused.
const CodeSearchFailed = "SEARCH_FAILED"

// SearchOptions configure web_search: a SearXNG instance the operator runs
// (its JSON API, which the instance must enable: search.formats: [html,
// json]). The instance is the operator's, so it may be on an internal
// address; the pages it finds are fetched with fetch_url, under its guard.
type SearchOptions struct {
	// URL is the instance's base URL (SEARXNG_URL); empty: no web_search.
	URL     string
	Timeout time.Duration
}

type searchArgs struct {
	Query      string `json:"query" jsonschema:"What to search for."`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"How many results, 1 to 10. Default 5."`
}

// SearchResult is one hit.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet,omitempty"`
}

// RegisterSearch adds web_search to reg when o.URL is set.
func RegisterSearch(reg *tools.Registry, o SearchOptions) error {
	if o.URL == "" {
		return nil
	}
	base, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return services.Errorf(services.EINVALID, "SEARXNG_URL must be an http(s) URL, got %q", o.URL)
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	client := &http.Client{Timeout: o.Timeout}
	return reg.Register(tools.Func("web_search", services.EffectEgress,
		"Search the web. Returns titles, URLs and snippets; read a page with fetch_url.",
		func(ctx context.Context, _ tools.Call, a searchArgs) (tools.Result, error) {
			if strings.TrimSpace(a.Query) == "" {
				return tools.Result{}, services.CodedErrorf(services.EINVALID, tools.CodeBadArguments, "argument \"query\" is empty")
			}
			n := a.MaxResults
			if n <= 0 {
				n = 5
			}
			n = min(n, 10)
			results, err := search(ctx, client, base, a.Query, n)
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSONResult(map[string]any{"query": a.Query, "results": results})
		}).WithHistory(tools.HistoryRule{MaxChars: 1200}))
}

func search(ctx context.Context, client *http.Client, base *url.URL, query string, n int) ([]SearchResult, error) {
	u := *base
	u.Path += "/search"
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, services.CodedErrorf(services.EUNAVAILABLE, CodeSearchFailed, "the search engine could not be reached: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden {
		return nil, services.CodedErrorf(services.EUNAVAILABLE, CodeSearchFailed,
			"the search engine refused a JSON search (its operator must enable search.formats: json)")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, services.CodedErrorf(services.EUNAVAILABLE, CodeSearchFailed, "the search engine answered HTTP %d", resp.StatusCode)
	}
	var body struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&body); err != nil {
		return nil, services.CodedErrorf(services.EUNAVAILABLE, CodeSearchFailed, "the search engine's answer is not the expected JSON: %v", err)
	}
	out := []SearchResult{}
	for _, r := range body.Results {
		if len(out) == n {
			break
		}
		snippet := strings.Join(strings.Fields(r.Content), " ")
		if rs := []rune(snippet); len(rs) > 300 {
			snippet = string(rs[:299]) + "…"
		}
		out = append(out, SearchResult{Title: strings.TrimSpace(r.Title), URL: r.URL, Snippet: snippet})
	}
	return out, nil
}
