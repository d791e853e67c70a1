package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/web/wire"
)

func TestEveryOwnerRouteRequiresAuth(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	post(t, in.URL, "a secret the owner wrote")
	routes := []struct{ method, path, body string }{
		{"POST", "/api/messages", `{"content":"x"}`},
		{"GET", "/api/timeline", ""},
		{"GET", "/api/whoami", ""},
		{"GET", "/api/ws", ""},
		{"GET", "/api/ws?after=0", ""},
	}
	for _, r := range routes {
		for _, tok := range []string{"", "wrong-token-wrong-token"} {
			resp, body := do(t, r.method, in.URL+r.path, tok, r.body)
			if resp.StatusCode != 401 || strings.TrimSpace(body) != `{"error":"unauthorized"}` {
				t.Errorf("%s %s token=%q: %d %s", r.method, r.path, tok, resp.StatusCode, body)
			}
		}
	}
	resp, body := do(t, "GET", in.URL+"/", "", "")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/login" || strings.Contains(body, "secret") {
		t.Errorf("chat page unauthenticated: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Nothing was stored by the refused posts.
	page, _ := in.Chat.Timeline(t.Context(), "global", 0, 0, 50)
	if len(page.Messages) != 1 {
		t.Fatalf("refused requests stored messages: %d", len(page.Messages))
	}
}

func TestCookieLoginAndCSRF(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	resp, _ := do(t, "POST", in.URL+"/login", "", "", "Content-Type", "application/x-www-form-urlencoded")
	if resp.StatusCode != 401 {
		t.Fatalf("empty login: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", in.URL+"/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	lr, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lr.Body.Close()
	var cookie *http.Cookie
	for _, c := range lr.Cookies() {
		if c.Name == "sb_session" {
			cookie = c
		}
	}
	if lr.StatusCode != 303 || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d cookie %+v", lr.StatusCode, cookie)
	}
	if strings.Contains(cookie.Value, testToken) {
		t.Fatal("session cookie carries the token")
	}
	ck := cookie.Name + "=" + cookie.Value
	if r, b := do(t, "GET", in.URL+"/api/timeline", "", "", "Cookie", ck); r.StatusCode != 200 {
		t.Fatalf("cookie read: %d %s", r.StatusCode, b)
	}
	if r, _ := do(t, "POST", in.URL+"/api/messages", "", `{"content":"csrf"}`, "Cookie", ck, "Origin", "https://evil.example"); r.StatusCode != 403 {
		t.Fatalf("cross-origin cookie write: %d", r.StatusCode)
	}
	if r, _ := do(t, "POST", in.URL+"/api/messages", "", `{"content":"csrf"}`, "Cookie", ck); r.StatusCode != 403 {
		t.Fatalf("cookie write without Origin: %d", r.StatusCode)
	}
	if r, b := do(t, "POST", in.URL+"/api/messages", "", `{"content":"same origin"}`, "Cookie", ck, "Origin", in.URL); r.StatusCode != 201 {
		t.Fatalf("same-origin cookie write: %d %s", r.StatusCode, b)
	}
	if r, _ := do(t, "GET", in.URL+"/api/timeline", "", "", "Cookie", "sb_session=9999999999.deadbeef"); r.StatusCode != 401 {
		t.Fatalf("forged session: %d", r.StatusCode)
	}
	// A ?token= link logs in and redirects the token out of the address bar.
	if r, _ := do(t, "GET", in.URL+"/login?token="+testToken, "", ""); r.StatusCode != 303 || r.Header.Get("Location") != "/" {
		t.Fatalf("login link: %d %s", r.StatusCode, r.Header.Get("Location"))
	}
}

func TestPostRejectsBadInputWithClearErrors(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"content":`, 400, "invalid JSON"},
		{`{"content": 5}`, 400, `field "content"`},
		{`{"text":"hi"}`, 400, `unknown field "text"`},
		{``, 400, "request body is empty"},
		{`{"content":"   "}`, 400, "message text is empty"},
		{`{"content":"x","source":"telegram"}`, 400, `source "telegram"`},
		{`{"content":"` + strings.Repeat("a", 40<<10) + `"}`, 413, "limit is"},
		{`{"content":"` + strings.Repeat("a", 300<<10) + `"}`, 413, ""},
		{`{"content":"a"} {"content":"b"}`, 400, "after the JSON object"},
	} {
		resp, body := do(t, "POST", in.URL+"/api/messages", testToken, tc.body)
		var eb struct{ Error string }
		_ = json.Unmarshal([]byte(body), &eb)
		if resp.StatusCode != tc.status || !strings.Contains(eb.Error, tc.want) {
			t.Errorf("body %.40q: %d %s (want %d %q)", tc.body, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	resp, body := do(t, "POST", in.URL+"/api/messages", testToken, "content=x", "Content-Type", "text/plain")
	if resp.StatusCode != 400 || !strings.Contains(body, "Content-Type") {
		t.Errorf("wrong content type: %d %s", resp.StatusCode, body)
	}
	page, _ := in.Chat.Timeline(t.Context(), "global", 0, 0, 50)
	if len(page.Messages) != 0 {
		t.Fatalf("bad requests stored %d messages", len(page.Messages))
	}
	for _, q := range []string{"?limit=0", "?limit=501", "?before=-1", "?after=x", "?before=3&after=1"} {
		if resp, body := do(t, "GET", in.URL+"/api/timeline"+q, testToken, ""); resp.StatusCode != 400 {
			t.Errorf("timeline%s: %d %s", q, resp.StatusCode, body)
		}
	}
}

func TestPostIsIdempotentOnClientKey(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	body := `{"content":"only once","client_key":"k-1"}`
	r1, b1 := do(t, "POST", in.URL+"/api/messages", testToken, body)
	r2, b2 := do(t, "POST", in.URL+"/api/messages", testToken, body)
	var m1, m2 struct{ Message wire.Message }
	_ = json.Unmarshal([]byte(b1), &m1)
	_ = json.Unmarshal([]byte(b2), &m2)
	if r1.StatusCode != 201 || r2.StatusCode != 200 || m1.Message.ID == 0 || m1.Message.ID != m2.Message.ID {
		t.Fatalf("retry: %d %d ids %d %d", r1.StatusCode, r2.StatusCode, m1.Message.ID, m2.Message.ID)
	}
	// Concurrent duplicates too.
	var wg sync.WaitGroup
	ids := make([]int64, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, b := do(t, "POST", in.URL+"/api/messages", testToken, `{"content":"race","client_key":"k-2"}`)
			var m struct{ Message wire.Message }
			_ = json.Unmarshal([]byte(b), &m)
			ids[i] = m.Message.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == 0 || id != ids[0] {
			t.Fatalf("concurrent duplicates got different ids: %v", ids)
		}
	}
	page, _ := in.Chat.Timeline(t.Context(), "global", 0, 0, 50)
	if len(page.Messages) != 2 {
		t.Fatalf("stored %d messages, want 2", len(page.Messages))
	}
}

func TestTimelinePagination(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	var ids []int64
	for i := 0; i < 12; i++ {
		ids = append(ids, post(t, in.URL, fmt.Sprint("m", i)).ID)
	}
	get := func(q string) wire.Page {
		resp, body := do(t, "GET", in.URL+"/api/timeline"+q, testToken, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", q, resp.StatusCode, body)
		}
		var tr wire.Page
		_ = json.Unmarshal([]byte(body), &tr)
		return tr
	}
	latest := get("?limit=5")
	if len(latest.Messages) != 5 || !latest.HasOlder || latest.Messages[0].ID != ids[7] || latest.Messages[4].ID != ids[11] {
		t.Fatalf("latest page: %+v", latest)
	}
	older := get(fmt.Sprintf("?limit=5&before=%d", ids[7]))
	if len(older.Messages) != 5 || !older.HasOlder || older.Messages[0].ID != ids[2] {
		t.Fatalf("older page: %+v", older)
	}
	oldest := get(fmt.Sprintf("?limit=5&before=%d", ids[2]))
	if len(oldest.Messages) != 2 || oldest.HasOlder {
		t.Fatalf("oldest page: %+v", oldest)
	}
	after := get(fmt.Sprintf("?limit=3&after=%d", ids[3]))
	if len(after.Messages) != 3 || after.Messages[0].ID != ids[4] {
		t.Fatalf("after page: %+v", after)
	}
	// after=0 is the beginning of the timeline, not its newest page.
	first := get("?limit=5&after=0")
	if len(first.Messages) != 5 || first.Messages[0].ID != ids[0] || first.Messages[4].ID != ids[4] {
		t.Fatalf("after=0 page: %+v", first)
	}
	if resp, body := do(t, "GET", in.URL+"/api/timeline?after=0&before=5", testToken, ""); resp.StatusCode != 400 || !strings.Contains(body, "not both") {
		t.Fatalf("after=0 with before: %d %s", resp.StatusCode, body)
	}
	if latest.Messages[0].Source != "api" || latest.Messages[0].Role != "user" {
		t.Fatalf("labels: %+v", latest.Messages[0])
	}
}

func TestWebsocketCatchUpIsGaplessAndOrdered(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	var ids []int64
	for i := 0; i < 30; i++ {
		ids = append(ids, post(t, in.URL, fmt.Sprint("before ", i)).ID)
	}
	c := dialWS(t, in.URL, fmt.Sprintf("?after=%d", ids[9]))
	backlog := c.untilReady()
	if len(backlog) != 20 || backlog[0] != ids[10] || backlog[19] != ids[29] {
		t.Fatalf("backlog: %v", backlog)
	}
	// Concurrent writers while the client follows live.
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				post(t, in.URL, fmt.Sprintf("w%d-%d", w, i))
			}
		}()
	}
	got := c.messages(writers * each)
	wg.Wait()
	last := ids[29]
	for _, m := range got {
		if m.ID <= last {
			t.Fatalf("out of order or duplicate: %d after %d", m.ID, last)
		}
		last = m.ID
	}
	// Everything the client saw is exactly what is stored, in order.
	page, _ := in.Chat.Timeline(t.Context(), "global", 0, ids[29], 500)
	if len(page.Messages) != len(got) {
		t.Fatalf("client saw %d live messages, %d stored", len(got), len(page.Messages))
	}
	for i := range got {
		if got[i].ID != page.Messages[i].ID {
			t.Fatalf("gap at %d: client %d, stored %d", i, got[i].ID, page.Messages[i].ID)
		}
	}
	// A reconnect from the middle replays the rest, no duplicates.
	c2 := dialWS(t, in.URL, fmt.Sprintf("?after=%d", got[49].ID))
	if rest := c2.untilReady(); len(rest) != 50 || rest[0] != got[50].ID {
		t.Fatalf("reconnect backlog: %d ids", len(rest))
	}
}

// TestWebsocketFromTheBeginning: ?after=0 replays the whole timeline from
// its first message, also when it is longer than one page of the backlog.
func TestWebsocketFromTheBeginning(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	const n = 505
	var ids []int64
	for i := range n {
		m, _, err := in.Chat.Post(t.Context(), services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceSystem,
			Role: services.RoleSystem, Content: fmt.Sprint("m", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	c := dialWS(t, in.URL, "?after=0")
	backlog := c.untilReady()
	if len(backlog) != n || backlog[0] != ids[0] || backlog[n-1] != ids[n-1] {
		t.Fatalf("backlog from after=0: %d ids, first %v, want %d from %d", len(backlog), backlog[:1], n, ids[0])
	}
}

func TestWebsocketPostFrameAndErrors(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	c := dialWS(t, in.URL, "?after=0")
	c.untilReady()
	ctx := t.Context()
	write := func(s string) {
		if err := c.conn.Write(ctx, 1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"type":"post","content":"from tui","source":"tui","client_key":"t1"}`)
	m := c.messages(1)[0]
	if m.Source != "tui" || m.Content != "from tui" {
		t.Fatalf("posted frame: %+v", m)
	}
	write(`not json`)
	f, err := c.next(2 * time.Second)
	if err != nil || f.Type != "error" || !strings.Contains(f.Error, "invalid JSON") {
		t.Fatalf("bad frame: %+v %v", f, err)
	}
	write(`{"type":"post","content":""}`)
	f, _ = c.next(2 * time.Second)
	if f.Type != "error" || !strings.Contains(f.Error, "empty") {
		t.Fatalf("empty post: %+v", f)
	}
}

func TestCrossInstanceFanout(t *testing.T) {
	t.Parallel()
	url := newSchemaURL(t)
	a := newInstance(t, url)
	b := newInstance(t, url)
	cb := dialWS(t, b.URL, "?after=0")
	cb.untilReady()
	ca := dialWS(t, a.URL, "?after=0")
	ca.untilReady()
	m := post(t, a.URL, "posted on A")
	got := cb.messages(1)[0]
	if got.ID != m.ID || got.Content != "posted on A" {
		t.Fatalf("B saw %+v", got)
	}
	m2 := post(t, b.URL, "posted on B")
	if got := ca.messages(2); got[0].ID != m.ID || got[1].ID != m2.ID {
		t.Fatalf("A saw %+v", got)
	}
}

func TestRulesMemoryAndContextAPI(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	model := llmtest.NewServer(t)
	in := newInstanceWithModel(t, pool, model)
	r, body := do(t, "POST", in.URL+"/api/rules", testToken, `{"text":"Answer in English."}`)
	if r.StatusCode != 201 {
		t.Fatalf("create rule: %d %s", r.StatusCode, body)
	}
	var rule web.RuleJSON
	_ = json.Unmarshal([]byte(body), &rule)
	if rule.ID == 0 || rule.Version != 1 || rule.Hard == nil || !*rule.Hard {
		t.Fatalf("rule: %s", body)
	}
	if r, body := do(t, "PUT", fmt.Sprintf("%s/api/rules/%d", in.URL, rule.ID), testToken, `{"text":"Answer in French.","version":1}`); r.StatusCode != 200 {
		t.Fatalf("update: %d %s", r.StatusCode, body)
	}
	r, body = do(t, "PUT", fmt.Sprintf("%s/api/rules/%d", in.URL, rule.ID), testToken, `{"text":"stale","version":1}`)
	if r.StatusCode != 409 || !strings.Contains(body, "CONTEXT_BUDGET_CONFLICT") {
		t.Fatalf("stale update: %d %s", r.StatusCode, body)
	}
	if r, body := do(t, "POST", in.URL+"/api/rules", testToken, `{"text":"  "}`); r.StatusCode != 400 || !strings.Contains(body, "empty") {
		t.Fatalf("empty rule: %d %s", r.StatusCode, body)
	}
	// A hard rule may carry a check pattern: a Go regexp, validated.
	if r, body := do(t, "POST", in.URL+"/api/rules", testToken, `{"text":"no shouting","check":"(!"}`); r.StatusCode != 400 || !strings.Contains(body, "not a valid regular expression") {
		t.Fatalf("bad check: %d %s", r.StatusCode, body)
	}
	if r, body := do(t, "POST", in.URL+"/api/rules", testToken, `{"text":"no shouting","hard":false,"check":"!"}`); r.StatusCode != 400 || !strings.Contains(body, "only a hard rule") {
		t.Fatalf("soft rule's check: %d %s", r.StatusCode, body)
	}
	if r, body := do(t, "POST", in.URL+"/api/rules", testToken, `{"text":"no shouting","check":"!"}`); r.StatusCode != 201 || !strings.Contains(body, `"check":"!"`) {
		t.Fatalf("rule with a check: %d %s", r.StatusCode, body)
	}
	if r, body := do(t, "PUT", in.URL+"/api/memory", testToken, `{"key":"name","value":"Ada"}`); r.StatusCode != 200 {
		t.Fatalf("memory: %d %s", r.StatusCode, body)
	}
	if r, body := do(t, "PUT", in.URL+"/api/memory", testToken, `{"key":"name","value":"Ada","confidence":7}`); r.StatusCode != 400 {
		t.Fatalf("bad confidence: %d %s", r.StatusCode, body)
	}
	// The next prompt carries both, and /api/context shows it.
	r, body = do(t, "GET", in.URL+"/api/context", testToken, "")
	if r.StatusCode != 200 || !strings.Contains(body, `"next"`) || !strings.Contains(body, `"prefix_hash"`) {
		t.Fatalf("context: %d %s", r.StatusCode, body)
	}
	post(t, in.URL, "hello")
	if !poll(30*time.Second, func() bool { return model.RequestCount() > 0 }) {
		t.Fatal("no model call")
	}
	sys := string(model.Requests()[0].Body)
	if !strings.Contains(sys, "Answer in French.") || !strings.Contains(sys, "name: Ada") {
		t.Fatalf("prompt lacks the rule or the setting: %s", sys)
	}
	if r, _ := do(t, "DELETE", fmt.Sprintf("%s/api/rules/%d?version=2", in.URL, rule.ID), testToken, ""); r.StatusCode != 204 {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	if r, _ := do(t, "DELETE", fmt.Sprintf("%s/api/rules/%d?version=2", in.URL, rule.ID), testToken, ""); r.StatusCode != 404 {
		t.Fatalf("delete again: %d", r.StatusCode)
	}
}

// TestPostsAreLabelledByTheirChannel: a REST post that names no source is
// labelled api (a script, not the chat page), in its answer, the timeline
// and the websocket; the page and the TUI name themselves; a websocket frame
// without a source is the page's; an unknown source is refused, naming the
// ones there are.
func TestPostsAreLabelledByTheirChannel(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	ws := dialWS(t, in.URL, "")
	ws.untilReady()
	want := []string{"api", "web", "tui", "api"}
	for i, body := range []string{`{"content":"from curl"}`, `{"content":"from the page","source":"web"}`,
		`{"content":"from the tui","source":"tui"}`, `{"content":"said api","source":"api"}`} {
		resp, b := do(t, "POST", in.URL+"/api/messages", testToken, body)
		var out struct{ Message wire.Message }
		_ = json.Unmarshal([]byte(b), &out)
		if resp.StatusCode != 201 || out.Message.Source != want[i] {
			t.Fatalf("POST %s: %d %s, want source %s", body, resp.StatusCode, b, want[i])
		}
	}
	for i, m := range ws.messages(4) {
		if m.Source != want[i] {
			t.Fatalf("websocket message %d: source %q, want %q", i, m.Source, want[i])
		}
	}
	resp, b := do(t, "POST", in.URL+"/api/messages", testToken, `{"content":"x","source":"fax"}`)
	if resp.StatusCode != 400 || !strings.Contains(b, `source \"fax\": want web, tui or api`) {
		t.Fatalf("unknown source: %d %s", resp.StatusCode, b)
	}
	if err := ws.conn.Write(t.Context(), 1, []byte(`{"type":"post","content":"a frame"}`)); err != nil {
		t.Fatal(err)
	}
	if m := ws.messages(1); m[0].Source != "web" {
		t.Fatalf("websocket post without source: %+v", m[0])
	}
	page, _ := in.Chat.Timeline(t.Context(), "global", 0, 0, 50)
	var got []string
	for _, m := range page.Messages {
		got = append(got, string(m.Source))
	}
	if strings.Join(got, ",") != "api,web,tui,api,web" {
		t.Fatalf("stored sources %v", got)
	}
}
