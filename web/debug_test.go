package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/metrics"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/web/browsertest"
)

// opsInstance is a server wired like serve wires it for operations: debug
// source, metrics, and a logger writing to Logs.
type opsInstance struct {
	URL   string
	Pool  *pgxpool.Pool
	Store *repository.Store
	Chat  *chat.Service
	Srv   *web.Server
	Meter *metrics.Metrics
	Logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const testMetricsToken = "scraper-token-0123456789abcdef"

func newOpsInstance(t *testing.T, logContent bool) *opsInstance {
	t.Helper()
	logs := &syncBuffer{}
	in := apptest.Start(t, apptest.Options{
		Token:  testToken,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Flags:  services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
		Configure: func(o *app.Config) {
			o.Chat.LogContent = logContent
			o.Metrics.CacheFor = time.Nanosecond
			// The runs seedRuns stores as running have no worker: the
			// reaper's pass at start is over before they exist, and no
			// other comes during the test.
			o.Queue.ReapEvery = time.Hour
			o.Web.ScrapeTokenHash = web.HashToken(testMetricsToken)
		},
	})
	return &opsInstance{URL: in.URL, Pool: in.App.Pool(), Store: in.Store, Chat: in.Chat, Srv: in.App.Web(), Meter: in.App.Metrics(), Logs: logs}
}

// seedRuns stores a main run that delegated to a researcher sub-agent, with
// the steps the runtime records, and a summary segment of main.
func seedRuns(t *testing.T, in *opsInstance) (parent, child services.Run) {
	t.Helper()
	ctx := t.Context()
	trigger, _, err := in.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceWeb, Content: "look into river queues"})
	if err != nil {
		t.Fatal(err)
	}
	parent, err = in.Store.CreateRun(ctx, services.NewRun{TimelineScope: "global", ContextScope: "main", TriggerMessageID: trigger.ID,
		Source: "web", Status: services.RunRunning, Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	child, err = in.Store.CreateRun(ctx, services.NewRun{TimelineScope: "global", ContextScope: "sub:researcher:pending", AgentID: "researcher",
		ParentRunID: parent.ID, Source: "agent", Status: services.RunRunning, Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	scope := "sub:researcher:" + strconv.FormatInt(child.ID, 10)
	dbtest.Exec(t, in.Pool, `UPDATE agent_runs SET context_scope = $2 WHERE id = $1`, child.ID, scope)
	child.ContextScope = scope
	prompt := `{"layers":[{"layer":"system","tokens":120,"items":3},{"layer":"history","tokens":300,"items":4,"trimmed":2,"reason":"budget"}],
		"warnings":[{"Code":"CONTEXT_BUDGET_FALLBACK","Message":"history trimmed"}],"total_tokens":420,"budget":1000,"window":8000,
		"prefix_hash":"9f2c6a0d1e7b4c3a","read_scope":"main","cursor_id":0}`
	for _, st := range []struct {
		run     int64
		kind    string
		payload string
	}{
		{parent.ID, "prompt", prompt},
		{parent.ID, "model_call", `{"model":"gpt-test","usage":{"PromptTokens":430,"CompletionTokens":12,"CachedTokens":100},"tool_calls":1}`},
		{parent.ID, "tool_call", `{"id":"c1","name":"delegate","arguments":"{\"agent\":\"researcher\"}"}`},
		{child.ID, "model_call", `{"model":"gpt-test","usage":{"PromptTokens":200,"CompletionTokens":30,"CachedTokens":0},"tool_calls":1}`},
		{child.ID, "tool_call", `{"id":"c2","name":"read_file","arguments":"{\"path\":\"notes.md\"}"}`},
		{child.ID, "tool_result", `{"id":"c2","name":"read_file","is_error":true,"code":"NOT_FOUND","chars":0}`},
		{child.ID, "handoff", `{"status":"ok","summary":"River stores jobs in PostgreSQL"}`},
		{parent.ID, "tool_result", `{"id":"c1","name":"delegate","is_error":false,"chars":31}`},
	} {
		if _, err := in.Store.AppendStep(ctx, st.run, services.StepKind(st.kind), json.RawMessage(st.payload)); err != nil {
			t.Fatal(err)
		}
	}
	// The exact request of the parent's last model call.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(seededRequest))
	_ = zw.Close()
	if _, err := in.Store.AppendStepWithRequest(ctx, parent.ID, services.StepModelCall, json.RawMessage(`{"model":"gpt-test"}`), services.RunRequest{
		TimelineScope: "global", ContextScope: "main", Provider: "openai", Model: "gpt-test", URL: "http://model.test/v1/chat/completions",
		Bytes: len(seededRequest), Gzip: gz.Bytes()}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Store.FinishRun(ctx, child.ID, services.RunFinish{Status: services.RunOK, PromptTokens: 200, CompletionTokens: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Store.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: 1,
		UntilMessageID: trigger.ID, SummaryText: "The owner asked about queues.", TokenCount: 7}); err != nil {
		t.Fatal(err)
	}
	return parent, child
}

// seededRequest is the stored body of the parent's last model call.
const seededRequest = `{"model":"gpt-test","messages":[{"role":"system","content":"You are the owner's assistant."},{"role":"user","content":"look into river queues"}]}`

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, body := do(t, "GET", url, testToken, "")
	if v != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %v in %s", url, err, body)
		}
	}
	return resp.StatusCode
}

func TestDebugAPI(t *testing.T) {
	t.Parallel()
	in := newOpsInstance(t, false)
	parent, child := seedRuns(t, in)

	var list struct{ Runs []web.DebugRun }
	if st := getJSON(t, in.URL+"/api/debug/runs?context_scope="+child.ContextScope, &list); st != 200 || len(list.Runs) != 1 || list.Runs[0].ID != child.ID {
		t.Fatalf("runs by context_scope: %d %+v", st, list.Runs)
	}
	if st := getJSON(t, in.URL+"/api/debug/runs?status=running&timeline=global", &list); st != 200 || len(list.Runs) != 1 || list.Runs[0].ID != parent.ID {
		t.Fatalf("runs by status: %d %+v", st, list.Runs)
	}
	if st := getJSON(t, in.URL+"/api/debug/runs?timeline=tg:1", &list); st != 200 || len(list.Runs) != 0 {
		t.Fatalf("runs of another timeline: %d %+v", st, list.Runs)
	}
	var d web.DebugRunDetail
	if st := getJSON(t, in.URL+"/api/debug/runs/"+strconv.FormatInt(child.ID, 10), &d); st != 200 {
		t.Fatalf("child run: %d", st)
	}
	if d.Parent == nil || d.Parent.ID != parent.ID || len(d.Children) != 0 || len(d.Steps) != 4 || d.Steps[3].Kind != "handoff" || string(d.Prompt) != "null" {
		t.Fatalf("child detail: %+v", d)
	}
	if st := getJSON(t, in.URL+"/api/debug/runs/"+strconv.FormatInt(parent.ID, 10), &d); st != 200 {
		t.Fatalf("parent run: %d", st)
	}
	var prompt struct {
		PrefixHash string `json:"prefix_hash"`
		Layers     []struct{ Layer string }
	}
	_ = json.Unmarshal(d.Prompt, &prompt)
	if d.Parent != nil || len(d.Children) != 1 || d.Children[0].ID != child.ID || prompt.PrefixHash != "9f2c6a0d1e7b4c3a" || len(prompt.Layers) != 2 {
		t.Fatalf("parent detail: %+v prompt %+v", d, prompt)
	}
	var cursors struct {
		Cursors []struct {
			Scope       string `json:"scope"`
			LagMessages int64  `json:"lag_messages"`
		}
	}
	if st := getJSON(t, in.URL+"/api/debug/summaries?timeline=global", &cursors); st != 200 || len(cursors.Cursors) != 1 || cursors.Cursors[0].Scope != "main" {
		t.Fatalf("cursors: %d %+v", st, cursors)
	}
	var segs struct{ Segments []struct{ Summary string } }
	if st := getJSON(t, in.URL+"/api/debug/segments?timeline=global&scope=main", &segs); st != 200 || len(segs.Segments) != 1 {
		t.Fatalf("segments: %d %+v", st, segs)
	}
	// Stored requests: per run and per scope, and the exact body.
	var reqs struct{ Requests []web.DebugRequest }
	if st := getJSON(t, in.URL+"/api/debug/requests?run="+strconv.FormatInt(parent.ID, 10), &reqs); st != 200 || len(reqs.Requests) != 1 ||
		reqs.Requests[0].Bytes != len(seededRequest) || reqs.Requests[0].RunID != parent.ID {
		t.Fatalf("requests of the run: %d %+v", st, reqs)
	}
	reqID := reqs.Requests[0].ID
	if st := getJSON(t, in.URL+"/api/debug/requests?timeline=global&context_scope=main", &reqs); st != 200 || len(reqs.Requests) != 1 || reqs.Requests[0].ID != reqID {
		t.Fatalf("requests of the scope: %d %+v", st, reqs)
	}
	if st := getJSON(t, in.URL+"/api/debug/requests?timeline=global&context_scope="+child.ContextScope, &reqs); st != 200 || len(reqs.Requests) != 0 {
		t.Fatalf("requests of the child's scope: %d %+v", st, reqs)
	}
	if resp, body := do(t, "GET", in.URL+"/api/debug/requests/"+strconv.FormatInt(reqID, 10), testToken, ""); resp.StatusCode != 200 || body != seededRequest {
		t.Fatalf("request body: %d %q", resp.StatusCode, body)
	}
	var flags struct{ Flags map[string]string }
	if st := getJSON(t, in.URL+"/api/debug/flags", &flags); st != 200 || flags.Flags["AGENT_CONTEXT_SCOPED_READ"] != "1" {
		t.Fatalf("flags: %d %+v", st, flags)
	}
	for url, want := range map[string]int{
		"/api/debug/runs/999999":         404,
		"/api/debug/runs/abc":            400,
		"/api/debug/runs?parent=-1":      400,
		"/api/debug/segments?scope=main": 400,
		"/api/debug/requests":            400,
		"/api/debug/requests/999999":     404,
		"/api/debug/requests/x":          400,
	} {
		if st := getJSON(t, in.URL+url, nil); st != want {
			t.Errorf("%s: %d, want %d", url, st, want)
		}
	}
	// Strangers get nothing; the page sends them to log in.
	if resp, body := do(t, "GET", in.URL+"/api/debug/runs", "", ""); resp.StatusCode != 401 || strings.Contains(body, "researcher") {
		t.Fatalf("debug API without credentials: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "GET", in.URL+"/debug", "", ""); resp.StatusCode != 302 || resp.Header.Get("Location") != "/login" {
		t.Fatalf("debug page without credentials: %d", resp.StatusCode)
	}
	// The scrape token opens /metrics only.
	if resp, _ := do(t, "GET", in.URL+"/api/debug/runs", testMetricsToken, ""); resp.StatusCode != 401 {
		t.Fatalf("metrics token on the debug API: %d", resp.StatusCode)
	}
}

// TestDebugPageInBrowser drives the debug page in headless Chromium: filter
// the runs by a sub-agent's context_scope, open the child run (its steps and
// parent), then follow the link to the parent (its children and prompt).
func TestDebugPageInBrowser(t *testing.T) {
	t.Parallel()
	in := newOpsInstance(t, false)
	parent, child := seedRuns(t, in)
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(in.URL+"/login?token="+testToken),
		chromedp.Navigate(in.URL+"/debug"),
		chromedp.WaitVisible("#runs tbody tr"),
	); err != nil {
		t.Fatalf("open debug page: %v", err)
	}
	// At 1280 px every column of the runs table is visible.
	if fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const c = document.querySelector(".runs-col"); return c.scrollWidth <= c.clientWidth })()`)); err != nil || !fits {
		t.Errorf("the runs table overflows its column at 1280 px (%v)", err)
	}
	poll := func(expr string) error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
			// A navigation (the filters, a reload) can destroy the page's
			// script context under the poll: poll again in the new one.
			if err == nil || !strings.Contains(err.Error(), "Cannot find context") || time.Now().After(deadline) {
				return err
			}
		}
	}
	if err := poll(`document.querySelectorAll("#runs tbody tr").length === 2`); err != nil {
		t.Fatalf("both runs listed: %v", err)
	}
	// The flags come from a request of their own: wait for them, as for
	// the rows (read once, they were sometimes not there yet).
	if err := poll(`document.getElementById("flags").textContent.includes("AGENT_CONTEXT_SCOPED_READ=1")`); err != nil {
		flags, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("flags").textContent`))
		t.Fatalf("flags shown: %q (%v)", flags, err)
	}
	if err := poll(`[...document.querySelectorAll("#cursors tbody tr")].some(tr => tr.dataset.scope === "main")`); err != nil {
		t.Fatalf("main summary cursor not shown: %v", err)
	}

	// Filter by the child's context scope: only the child run is left.
	if err := chromedp.Do(ctx, chromedp.SetValue("#f-scope", child.ContextScope), chromedp.Click("#apply")); err != nil {
		t.Fatal(err)
	}
	if err := poll(fmt.Sprintf(`(() => { const rows = document.querySelectorAll("#runs tbody tr"); return rows.length === 1 && rows[0].dataset.run === "%d" })()`, child.ID)); err != nil {
		t.Fatalf("filter by context_scope: %v", err)
	}
	// Open the child: its steps (model call tokens, failed tool result, handoff) and its parent.
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`#runs tbody tr[data-run="%d"]`, child.ID))); err != nil {
		t.Fatal(err)
	}
	if err := poll(fmt.Sprintf(`(document.getElementById("run-title") || {}).textContent === "Run #%d"`, child.ID)); err != nil {
		t.Fatalf("child run not opened: %v", err)
	}
	kinds, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#steps li")].map(li => li.dataset.kind)`))
	if err != nil || strings.Join(kinds, ",") != "model_call,tool_call,tool_result,handoff" {
		t.Fatalf("child steps: %v %v", kinds, err)
	}
	summaries, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("steps").textContent`))
	for _, want := range []string{"prompt 200", "completion 30", "read_file → error NOT_FOUND", "River stores jobs in PostgreSQL"} {
		if !strings.Contains(summaries, want) {
			t.Errorf("child steps lack %q: %s", want, summaries)
		}
	}
	scope, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#detail [data-field="context_scope"]').textContent`))
	if scope != child.ContextScope {
		t.Errorf("child scope shown: %q", scope)
	}
	// Follow the parent link: the parent lists the child and shows its prompt.
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`#parent a[data-run-link="%d"]`, parent.ID))); err != nil {
		t.Fatal(err)
	}
	if err := poll(fmt.Sprintf(`(document.getElementById("run-title") || {}).textContent === "Run #%d"`, parent.ID)); err != nil {
		t.Fatalf("parent run not opened: %v", err)
	}
	children, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#children a[data-run-link]")].map(a => a.dataset.runLink)`))
	if strings.Join(children, ",") != strconv.FormatInt(child.ID, 10) {
		t.Fatalf("children of the parent: %v", children)
	}
	hash, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#prompt [data-field="prefix hash"]').textContent`))
	layers, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#layers tbody tr").length`))
	promptText, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("prompt").textContent`))
	if hash != "9f2c6a0d1e7b4c3a" || layers != 2 || !strings.Contains(promptText, "CONTEXT_BUDGET_FALLBACK") {
		t.Fatalf("prompt inspection: hash %q, %d layers, %q", hash, layers, promptText)
	}
	// The parent's model request: opened, the exact JSON sent, indented.
	if err := poll(`document.querySelectorAll("#run-requests details[data-request]").length === 1`); err != nil {
		t.Fatalf("the run's model request not listed: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#run-requests details[data-request] summary`)); err != nil {
		t.Fatal(err)
	}
	if err := poll(`(document.querySelector("#run-requests pre.request-body") || {}).textContent.includes('"content": "look into river queues"')`); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("#run-requests pre") || {}).textContent`))
		t.Fatalf("the request body is not shown: %v %q", err, body)
	}
	// The scope's requests: with a timeline and main as the filter, the
	// parent's request is listed.
	setFilters := func(timeline, scope string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { document.getElementById("f-timeline").value = %q; document.getElementById("f-scope").value = %q; return true })()`, timeline, scope))); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Click("#apply")); err != nil {
			t.Fatal(err)
		}
	}
	setFilters("global", "main")
	if err := poll(`document.querySelectorAll("#scope-requests details[data-request]").length === 1`); err != nil {
		t.Fatalf("the scope's model requests not listed: %v", err)
	}
	setFilters("", child.ContextScope)
	if err := poll(fmt.Sprintf(`location.search.includes("context_scope=%s") && !location.search.includes("timeline=")`, url.QueryEscape(child.ContextScope))); err != nil {
		t.Fatalf("filters back to the child's scope: %v", err)
	}
	// The selection survives a reload (it is in the address).
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible("#run-title")); err != nil {
		t.Fatal(err)
	}
	if err := poll(fmt.Sprintf(`(document.getElementById("run-title") || {}).textContent === "Run #%d" && document.getElementById("f-scope").value === %q`, parent.ID, child.ContextScope)); err != nil {
		t.Fatalf("after reload: %v", err)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		shoot(t, ctx, "debug-desktop.png", 1200, 800)
	}
}
