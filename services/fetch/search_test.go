package fetch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services/tools"
)

// searxng answers like a SearXNG instance's JSON API (/search?q=&format=json).
func searxng(t *testing.T, jsonOn bool) (*httptest.Server, *[]string) {
	t.Helper()
	var queries []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" {
			http.NotFound(w, r)
			return
		}
		if !jsonOn || r.URL.Query().Get("format") != "json" {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		queries = append(queries, r.URL.Query().Get("q"))
		var results []map[string]string
		for i := 1; i <= 12; i++ {
			results = append(results, map[string]string{"title": fmt.Sprintf(" Result %d ", i), "url": fmt.Sprintf("https://example.test/%d", i),
				"content": "A  snippet\\nabout " + r.URL.Query().Get("q"), "engine": "duckduckgo"})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"query": r.URL.Query().Get("q"), "number_of_results": 12, "results": results})
	}))
	t.Cleanup(s.Close)
	return s, &queries
}

func TestWebSearch(t *testing.T) {
	t.Parallel()
	s, queries := searxng(t, true)
	reg := tools.NewRegistry(nil)
	if err := RegisterSearch(reg, SearchOptions{URL: s.URL + "/"}); err != nil {
		t.Fatal(err)
	}
	res := reg.Execute(context.Background(), "web_search", tools.Call{Arguments: []byte(`{"query":"concert tickets","max_results":3}`)})
	var out struct {
		Query   string
		Results []SearchResult
	}
	if res.IsError || json.Unmarshal([]byte(res.Content), &out) != nil || len(out.Results) != 3 ||
		out.Results[0].Title != "Result 1" || out.Results[0].URL != "https://example.test/1" || !strings.Contains(out.Results[0].Snippet, "about concert tickets") {
		t.Fatalf("web_search: %+v", res)
	}
	if len(*queries) != 1 || (*queries)[0] != "concert tickets" {
		t.Fatalf("queries sent: %v", *queries)
	}
	if res := reg.Execute(context.Background(), "web_search", tools.Call{Arguments: []byte(`{"query":"x","max_results":50}`)}); res.IsError || strings.Count(res.Content, `"url"`) != 10 {
		t.Fatalf("max_results above 10: %s", res.Content)
	}

	off, _ := searxng(t, false)
	reg2 := tools.NewRegistry(nil)
	if err := RegisterSearch(reg2, SearchOptions{URL: off.URL}); err != nil {
		t.Fatal(err)
	}
	if res := reg2.Execute(context.Background(), "web_search", tools.Call{Arguments: []byte(`{"query":"x"}`)}); !res.IsError || res.ErrorCode != CodeSearchFailed || !strings.Contains(res.Content, "search.formats") {
		t.Fatalf("an instance without JSON: %+v", res)
	}
	if err := RegisterSearch(tools.NewRegistry(nil), SearchOptions{URL: "searx.local"}); err == nil {
		t.Fatal("a URL without scheme was accepted")
	}
	none := tools.NewRegistry(nil)
	if err := RegisterSearch(none, SearchOptions{}); err != nil || len(none.List()) != 0 {
		t.Fatal("without SEARXNG_URL there must be no web_search")
	}
}
