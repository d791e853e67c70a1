package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
)

// TestInspectCommand runs `switchboard inspect` against a populated schema:
// every named query as JSON, one as a table, and an unknown name.
func TestInspectCommand(t *testing.T) {
	t.Parallel()
	pool, schema := dbtest.Schema(t)
	dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'web', 'hello'), ('user', 'telegram', '你好，世界')`)
	dbtest.Exec(t, pool, `INSERT INTO chat_context_summaries (timeline_scope, scope, until_message_id, summary_text) VALUES ('global', 'main', 1, 'x')`)
	dbtest.Exec(t, pool, `INSERT INTO agent_runs (source, status, prompt_token_budget, estimated_prompt_tokens) VALUES ('web', 'queued', 1000, 250)`)
	getenv := env(map[string]string{"DATABASE_URL": apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema)), "LOG_LEVEL": "error"})
	ctx := context.Background()

	var out, errOut strings.Builder
	if err := run(ctx, []string{"inspect", "--json"}, getenv, &out, &errOut); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, errOut.String())
	}
	var all []struct {
		Name    string
		Columns []string
		Rows    []map[string]any
	}
	if err := json.Unmarshal([]byte(out.String()), &all); err != nil {
		t.Fatalf("inspect --json output: %v\n%s", err, out.String())
	}
	if len(all) != 8 || all[0].Name != "recent_visible_messages" || all[7].Name != "oldest_unfinished_run" {
		t.Fatalf("queries run: %+v", all)
	}
	for _, q := range all {
		if len(q.Rows) == 0 || len(q.Rows[0]) != len(q.Columns) {
			t.Errorf("%s: %d rows, columns %v", q.Name, len(q.Rows), q.Columns)
		}
	}
	if id, ok := all[0].Rows[0]["id"].(float64); !ok || id != 2 {
		t.Errorf("numbers are JSON numbers: %#v", all[0].Rows[0]["id"])
	}
	if hb, ok := all[7].Rows[0]["heartbeat_at"]; !ok || hb != nil {
		t.Errorf("NULL is null: %#v", all[7].Rows[0])
	}

	out.Reset()
	if err := run(ctx, []string{"inspect", "recent_visible_messages"}, getenv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, want := range []string{"== recent_visible_messages\n", "id | role | source   |", " 2 | user | telegram |", "| 你好，世界\n", "(2 rows)\n"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	err := run(ctx, []string{"inspect", "no_such_query"}, getenv, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `unknown query "no_such_query"`) || !strings.Contains(err.Error(), "summary_cursor_lag") {
		t.Fatalf("unknown query: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"inspect", "--list"}, getenv, &out, &errOut); err != nil || !strings.Contains(out.String(), "child_runs_per_parent") {
		t.Fatalf("--list: %v %s", err, out.String())
	}
}

// TestServeExposesMetricsAndDebug runs a real serve: a message answered by
// the offline model shows in /metrics (scraped with METRICS_TOKEN) and in
// the debug API, and the scrape token opens nothing else.
func TestServeExposesMetricsAndDebug(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	const owner, scraper = "owner-token-for-metrics-test", "scrape-token-for-metrics-test"
	// The scrape token is not the owner's, so the per-IP limit for anonymous
	// clients applies to it; this test polls faster than a scraper would.
	base := startServe(t, bin, migratedDB(t), "WEB_AUTH_TOKEN="+owner, "METRICS_TOKEN="+scraper, "RATE_LIMIT_ANON_PER_MINUTE=0")
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	req, _ := http.NewRequest("POST", base+"/api/messages", strings.NewReader(`{"content":"hello metrics"}`))
	req.Header.Set("Authorization", "Bearer "+owner)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("post: %v %v", resp, err)
	}
	resp.Body.Close()

	var body string
	// The database gauges are cached for 5 s between scrapes; the checks
	// below say what is missing if this gives up.
	pollEvery(30*time.Second, 200*time.Millisecond, func() bool {
		var status int
		status, body = get("/metrics", scraper)
		if status != 200 {
			t.Fatalf("scrape with METRICS_TOKEN: %d %s", status, body)
		}
		return strings.Contains(body, "\nswitchboard_runs_finished_total{status=\"ok\"} 1\n") &&
			strings.Contains(body, "\nswitchboard_messages_total{channel=\"agent\"} 1\n")
	})
	for _, want := range []string{
		`switchboard_runs_finished_total{status="ok"} 1`,
		`switchboard_messages_total{channel="api"} 1`, // a REST post that names no source
		`switchboard_messages_total{channel="agent"} 1`,
		`switchboard_http_requests_total{code="201",method="POST",route="/api/messages"} 1`,
		`switchboard_db_scrape_success 1`,
		`switchboard_websocket_clients 0`,
	} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
	if status, _ := get("/metrics", ""); status != 401 {
		t.Errorf("/metrics without a token: %d", status)
	}
	if status, _ := get("/api/debug/runs", scraper); status != 401 {
		t.Errorf("METRICS_TOKEN opened the debug API: %d", status)
	}
	status, runs := get("/api/debug/runs?context_scope=main", owner)
	if status != 200 || !strings.Contains(runs, `"status":"ok"`) {
		t.Errorf("debug runs: %d %s", status, runs)
	}
	if status, flags := get("/api/debug/flags", owner); status != 200 || !strings.Contains(flags, `"AGENT_CONTEXT_SCOPED_WRITE":"1"`) {
		t.Errorf("debug flags: %d %s", status, flags)
	}
}
