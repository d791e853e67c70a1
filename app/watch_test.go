package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/mcp"
)

// fireNow makes the waiting fire job of schedule id available at once
// (its schedule fires every hour): River's worker takes it as it would at
// its time, and the fire runs early, once, on the schedule's grid.
func fireNow(t *testing.T, in *apptest.Instance, id int64) {
	t.Helper()
	var n int
	waitFor(t, "the next fire's job", func() bool {
		tag, err := in.App.Pool().Exec(context.Background(), `UPDATE river_job SET state = 'available', scheduled_at = now()
			WHERE kind = 'schedule_fire' AND state = 'scheduled' AND (args->>'schedule_id')::bigint = $1`, id)
		if err != nil {
			t.Fatal(err)
		}
		n = int(tag.RowsAffected())
		return n > 0
	})
}

// fireAndWait fires schedule id now and waits until it has n finished fires.
func fireAndWait(t *testing.T, in *apptest.Instance, id int64, n int) services.ScheduleFire {
	t.Helper()
	fireNow(t, in, id)
	var last services.ScheduleFire
	waitFor(t, fmt.Sprintf("fire %d to finish", n), func() bool {
		fires, err := in.Store.ListFires(context.Background(), id, 100)
		if err != nil || len(fires) < n || fires[0].Status == services.FireRunning {
			return false
		}
		last = fires[0]
		return len(fires) == n
	})
	return last
}

// fireReceipt is a fire as GET /api/schedules/{id} shows it.
type fireReceipt struct {
	Receipt    string `json:"receipt"`
	Why        string `json:"why"`
	Tokens     int    `json:"tokens"`
	ModelCalls int    `json:"model_calls"`
	Notified   bool   `json:"notified"`
}

// TestWatchMonitorCallsTheModelOnlyOnChange: the owner asks to be told when
// a page changes; the agent's schedule tool creates a watch. The page (a
// local test server) shows a new "Updated at" timestamp on every request,
// which the watch ignores: 10 fires over the unchanged page make exactly 1
// model call (the first look, which is not news); the tickets appearing
// make exactly 1 more call and exactly 1 notification; later fires, the
// timestamp still moving, make none. The fires' receipts (API and
// /schedules) say ran or unchanged with the model calls and tokens spent.
func TestWatchMonitorCallsTheModelOnlyOnChange(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	var open atomic.Bool
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		state := "No tickets yet."
		if open.Load() {
			state = "<b>Tickets available</b> from today."
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><h1>Box office</h1><p>%s</p><footer>Updated at 12:%02d:%02d</footer></body></html>`, state, n/60, n%60)
	}))
	t.Cleanup(page.Close)
	url := page.URL + "/tickets"

	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		fire := strings.Contains(string(r.Body), fireMarker)
		switch {
		case fire && strings.Contains(r.LastMessage, "Tickets available"):
			return llmtest.Text(`{"news": true, "message": "Tickets are available now at ` + url + `"}`)
		case fire:
			return llmtest.Text(`{"news": false, "message": ""}`)
		case r.LastIsToolResult:
			return llmtest.Text("Done: I will tell you when tickets appear.")
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
		Configure: func(o *app.Config) { o.Fetch.Allow = []string{"127.0.0.1"} }})

	model.Enqueue(llmtest.Call("schedule", `{"name":"Tickets","task":"Tell me when tickets are available","every":"1h",
		"watch":{"url":"`+url+`","ignore":["Updated at [0-9:]+"]}}`))
	if reply := ask(t, in, "Watch the box office page and tell me when tickets appear"); !strings.Contains(reply, "I will tell you") {
		t.Fatalf("answer: %q", reply)
	}
	// The tool's schema offers watch and says when to use it.
	described := false
	for _, r := range model.Requests() {
		described = described || strings.Contains(string(r.Body), "To watch or monitor a page") && strings.Contains(string(r.Body), "Regexps to ignore: timestamps")
	}
	if !described {
		t.Fatal("no request describes the schedule tool's watch")
	}
	list, err := in.Store.ListSchedules(context.Background(), services.DefaultTimeline, false)
	if err != nil || len(list) != 1 || list[0].Watch == nil || list[0].Watch.URL != url || len(list[0].Watch.Ignore) != 1 {
		t.Fatalf("schedules: %+v (%v)", list, err)
	}
	id := list[0].ID

	fireCalls := func() int {
		n := 0
		for _, r := range model.Requests() {
			if strings.Contains(string(r.Body), fireMarker) {
				n++
			}
		}
		return n
	}
	for i := 1; i <= 10; i++ {
		f := fireAndWait(t, in, id, i)
		want := services.FireUnchanged
		if i == 1 {
			want = services.FireOK
		}
		if f.Status != want {
			t.Fatalf("fire %d: %+v, want %s", i, f, want)
		}
	}
	if n := fireCalls(); n != 1 {
		t.Fatalf("10 fires over an unchanged page made %d model calls, want 1", n)
	}
	if hits.Load() != 10 {
		t.Fatalf("the page was read %d times in 10 fires", hits.Load())
	}
	if notes := visibleFrom(t, in, services.SourceSchedule); len(notes) != 0 {
		t.Fatalf("the first look told the owner: %+v", notes)
	}

	// The tickets appear: one model call, one notification; then the
	// timestamp alone moves and nothing more happens.
	open.Store(true)
	if f := fireAndWait(t, in, id, 11); f.Status != services.FireOK || !f.Notified || f.ModelCalls != 1 || f.Tokens == 0 {
		t.Fatalf("the change's fire: %+v", f)
	}
	for i := 12; i <= 14; i++ {
		if f := fireAndWait(t, in, id, i); f.Status != services.FireUnchanged {
			t.Fatalf("fire %d after the change: %+v", i, f)
		}
	}
	if n := fireCalls(); n != 2 {
		t.Fatalf("model calls after the change: %d, want 2", n)
	}
	notes := visibleFrom(t, in, services.SourceSchedule)
	if len(notes) != 1 || !strings.Contains(notes[0].Content, "Tickets are available now") || !strings.Contains(notes[0].Content, "**Tickets**") {
		t.Fatalf("notifications: %+v", notes)
	}
	// The change's fire read the previous and the new content and a diff,
	// marked as a page's data.
	var changed llmtest.Request
	for _, r := range model.Requests() {
		if strings.Contains(string(r.Body), fireMarker) {
			changed = r
		}
	}
	for _, want := range []string{"Previous content:", "No tickets yet", "New content:", "+ **Tickets available** from today.", "- No tickets yet.", "untrusted data after reading " + url} {
		if !strings.Contains(changed.LastMessage, want) {
			t.Fatalf("the change's input lacks %q: %s", want, changed.LastMessage)
		}
	}
	if strings.Contains(changed.LastMessage, "Updated at") {
		t.Fatalf("the ignored timestamp reached the model: %s", changed.LastMessage)
	}
	// No run for an unchanged fire; both runs are tainted by the page.
	var runs, tainted int
	if err := in.App.Pool().QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE tainted_by LIKE '%'||$1||'%')
		FROM agent_runs WHERE agent_id = 'schedule'`, url).Scan(&runs, &tainted); err != nil || runs != 2 || tainted != 2 {
		t.Fatalf("schedule runs %d, tainted %d (%v)", runs, tainted, err)
	}

	// Receipts: the API and /schedules.
	var got struct {
		ID    int64         `json:"id"`
		Fires []fireReceipt `json:"fires"`
	}
	if code := apiCall(t, in, "GET", fmt.Sprintf("/api/schedules/%d?fires=20", id), "", &got); code != http.StatusOK || len(got.Fires) != 14 {
		t.Fatalf("GET: %d %+v", code, got)
	}
	count := map[string]int{}
	for i, f := range got.Fires {
		count[f.Receipt]++
		switch f.Receipt {
		case services.ReceiptUnchanged:
			if f.ModelCalls != 0 || f.Tokens != 0 || f.Notified {
				t.Fatalf("unchanged receipt %d: %+v", i, f)
			}
		case services.ReceiptRan:
			if f.ModelCalls != 1 || f.Tokens == 0 {
				t.Fatalf("ran receipt %d: %+v", i, f)
			}
		}
	}
	if count[services.ReceiptRan] != 2 || count[services.ReceiptUnchanged] != 12 || !got.Fires[3].Notified {
		t.Fatalf("receipts: %v %+v", count, got.Fires)
	}
	reply := ask(t, in, "/schedules")
	if !strings.Contains(reply, "watching "+url) || strings.Count(reply, "unchanged — 0 model calls, 0 tokens") != 4 || !strings.Contains(reply, "ran — 1 model call,") || !strings.Contains(reply, "told you") {
		t.Fatalf("/schedules: %s", reply)
	}
	if raw, _ := json.Marshal(got); !strings.Contains(string(raw), `"receipt":"unchanged"`) {
		t.Fatalf("receipt JSON: %s", raw)
	}

	// A bad watch is refused naming its part.
	type errBody struct{ Error string }
	for _, c := range []struct{ body, want string }{
		{`{"every":"1h","watch":{"url":"` + url + `","selector":"div[["}}`, `watch.selector "div[[" is not a CSS selector`},
		{`{"every":"1h","watch":{"url":"file:///etc/passwd"}}`, `watch.url "file:///etc/passwd" is not an absolute http or https URL`},
		{`{"every":"1h","watch":{"url":"` + url + `","ignore":["(x"]}}`, `watch.ignore "(x" is not a regular expression`},
		{`{"task":"x","every":"1h","watch":{"selector":"#x"}}`, "watch.url is missing"},
	} {
		var e errBody
		if code := apiCall(t, in, "POST", "/api/schedules", c.body, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, c.want) {
			t.Errorf("POST %s: %d %q, want 400 naming %q", c.body, code, e.Error, c.want)
		}
	}
}

type stockArgs struct {
	Item string `json:"item" jsonschema:"the item"`
}

// TestWatchMCPToolResult: a watch over a read-only MCP tool (an in-process
// MCP server over streamable HTTP) called with fixed arguments: fires whose
// result only changes its "checked" counter (ignored) make no model call;
// the stock changing makes one and one notification; the run is tainted by
// the MCP result. A watch over a tool that is not read-only fails its fire
// with the reason and never calls the tool.
func TestWatchMCPToolResult(t *testing.T) {
	t.Parallel()
	var calls, writes atomic.Int64
	var inStock atomic.Bool
	srv := sdk.NewServer(&sdk.Implementation{Name: "shop", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "stock", Description: "Stock of an item."}, func(_ context.Context, _ *sdk.CallToolRequest, a stockArgs) (*sdk.CallToolResult, any, error) {
		n := calls.Add(1)
		state := "sold out"
		if inStock.Load() {
			state = "3 in stock"
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%s: %s (checked %d times)", a.Item, state, n)}}}, nil, nil
	})
	sdk.AddTool(srv, &sdk.Tool{Name: "order", Description: "Orders an item."}, func(_ context.Context, _ *sdk.CallToolRequest, a stockArgs) (*sdk.CallToolResult, any, error) {
		writes.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ordered"}}}, nil, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)

	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case !strings.Contains(string(r.Body), fireMarker):
			return llmtest.Echo(r)
		case strings.Contains(r.LastMessage, "3 in stock"):
			return llmtest.Text(`{"news": true, "message": "The lamp is back in stock"}`)
		}
		return llmtest.Text(`{"news": false, "message": ""}`)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) {
			o.MCP = mcp.Config{"shop": {URL: hs.URL, ReadOnly: []string{"stock"}}}
		}})
	waitFor(t, "the shop's tools", func() bool {
		list, _ := in.App.Tools().ToolCatalog()
		for _, ti := range list {
			if ti.Name == "shop__stock" {
				return true
			}
		}
		return false
	})
	var sc services.Schedule
	body := `{"name":"Lamp","task":"Tell me when the lamp is in stock","every":"1h",
		"watch":{"tool":"shop__stock","arguments":{"item":"lamp"},"ignore":["\\(checked \\d+ times\\)"]}}`
	if code := apiCall(t, in, "POST", "/api/schedules", body, &sc); code != http.StatusCreated || sc.Watch == nil || sc.Watch.Tool != "shop__stock" {
		t.Fatalf("POST: %d %+v", code, sc)
	}
	fireCalls := func() int {
		n := 0
		for _, r := range model.Requests() {
			if strings.Contains(string(r.Body), fireMarker) {
				n++
			}
		}
		return n
	}
	for i := 1; i <= 5; i++ {
		fireAndWait(t, in, sc.ID, i)
	}
	if n := fireCalls(); n != 1 || calls.Load() != 5 {
		t.Fatalf("5 fires over an unchanged result: %d model calls (want 1), %d tool calls", n, calls.Load())
	}
	inStock.Store(true)
	if f := fireAndWait(t, in, sc.ID, 6); f.Status != services.FireOK || !f.Notified {
		t.Fatalf("the change's fire: %+v", f)
	}
	fireAndWait(t, in, sc.ID, 7)
	if n := fireCalls(); n != 2 {
		t.Fatalf("model calls: %d, want 2", n)
	}
	if notes := visibleFrom(t, in, services.SourceSchedule); len(notes) != 1 || !strings.Contains(notes[0].Content, "back in stock") {
		t.Fatalf("notifications: %+v", notes)
	}
	var tainted int
	if err := in.App.Pool().QueryRow(context.Background(), `SELECT count(*) FROM agent_runs WHERE agent_id = 'schedule'
		AND tainted_by = 'after reading a result of MCP server shop__stock'`).Scan(&tainted); err != nil || tainted != 2 {
		t.Fatalf("tainted runs: %d (%v)", tainted, err)
	}

	// A tool that is not read-only is never called by a watch.
	var bad services.Schedule
	if code := apiCall(t, in, "POST", "/api/schedules", `{"task":"x","every":"1h","watch":{"tool":"shop__order","arguments":{"item":"lamp"}}}`, &bad); code != http.StatusCreated {
		t.Fatalf("POST order watch: %d", code)
	}
	f := fireAndWait(t, in, bad.ID, 1)
	if r, why := f.Receipt(); r != services.ReceiptFailed || !strings.Contains(why, `watch.tool "shop__order" is not read-only`) || writes.Load() != 0 {
		t.Fatalf("order watch: %s %q, %d orders", r, why, writes.Load())
	}
}

// TestUpdateScheduleToolSetsAWatch: the agent's update_schedule tool takes
// the same watch as PATCH /api/schedules/ID, with the same validation: it
// adds a watch to a schedule, a bad pattern is refused with the message
// PATCH gives (the schedule unchanged), and an empty url removes it.
func TestUpdateScheduleToolSetsAWatch(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if r.LastIsToolResult {
			return llmtest.Text("Tool said: " + r.LastMessage)
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true}})
	var sc services.Schedule
	if code := apiCall(t, in, "POST", "/api/schedules", `{"name":"Tickets","task":"Check the tickets","every":"1h"}`, &sc); code != http.StatusCreated {
		t.Fatalf("POST: %d", code)
	}
	stored := func() *services.Watch {
		got, err := in.Store.GetSchedule(context.Background(), sc.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Watch
	}
	const page = "https://example.org/tickets"
	model.Enqueue(llmtest.Call("update_schedule", fmt.Sprintf(`{"id":%d,"watch":{"url":%q,"selector":"#stock","ignore":["Updated at [0-9:]+"]}}`, sc.ID, page)))
	if reply := ask(t, in, "Watch the tickets page for that one"); !strings.Contains(reply, `"watch"`) || !strings.Contains(reply, page) {
		t.Fatalf("answer: %q", reply)
	}
	if w := stored(); w == nil || w.URL != page || w.Selector != "#stock" || len(w.Ignore) != 1 {
		t.Fatalf("the watch after update_schedule: %+v", w)
	}
	described := false
	for _, r := range model.Requests() {
		described = described || strings.Contains(string(r.Body), "As in schedule; url")
	}
	if !described {
		t.Fatal("no request describes update_schedule's watch")
	}

	// The same bad watch: the tool and PATCH refuse it with one message.
	bad := `{"url":"` + page + `","ignore":["*b"]}`
	var e struct {
		Error string `json:"error"`
	}
	if code := apiCall(t, in, "PATCH", fmt.Sprintf("/api/schedules/%d", sc.ID), fmt.Sprintf(`{"version":%d,"watch":%s}`, sc.Version+1, bad), &e); code != http.StatusBadRequest ||
		!strings.Contains(e.Error, `watch.ignore "*b" is not a regular expression`) {
		t.Fatalf("PATCH with a bad watch: %d %q", code, e.Error)
	}
	model.Enqueue(llmtest.Call("update_schedule", fmt.Sprintf(`{"id":%d,"watch":%s}`, sc.ID, bad)))
	if reply := ask(t, in, "Ignore lines like *b"); !strings.Contains(reply, `watch.ignore \"*b\" is not a regular expression`) && !strings.Contains(reply, `watch.ignore "*b" is not a regular expression`) {
		t.Fatalf("answer: %q", reply)
	}
	if w := stored(); w == nil || len(w.Ignore) != 1 || w.Ignore[0] != "Updated at [0-9:]+" {
		t.Fatalf("the watch after a refused update: %+v", w)
	}

	// An empty url removes the watch; the schedule stays.
	model.Enqueue(llmtest.Call("update_schedule", fmt.Sprintf(`{"id":%d,"watch":{"url":""}}`, sc.ID)))
	ask(t, in, "Stop watching the page, just check")
	if w := stored(); w != nil {
		t.Fatalf("the watch after url \"\": %+v", w)
	}
}
