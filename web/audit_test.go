package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/browsertest"
)

// auditRows is the audit trail of in, oldest first.
func auditRows(t *testing.T, in *instance) []services.AuditEntry {
	t.Helper()
	rows, err := in.Store.ListAudit(t.Context(), time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestAuditTrailOfOwnerActions: a login (form and link), a logout, a
// pairing approval, rule and schedule changes through the REST API each
// write one audit row, with the channel they came through and no token;
// a failed login writes none; GET /api/debug/audit pages the rows newest
// first for the owner only, and the chain verifies.
func TestAuditTrailOfOwnerActions(t *testing.T) {
	t.Parallel()
	url := newSchemaURL(t)
	in := newInstance(t, url)
	pool := dbtest.PoolFor(t, url)
	form := func(tok string) *http.Response {
		resp, _ := do(t, "POST", in.URL+"/login", "", "token="+tok, "Content-Type", "application/x-www-form-urlencoded")
		return resp
	}
	if r := form("wrong-token"); r.StatusCode != 401 || len(auditRows(t, in)) != 0 {
		t.Fatalf("failed login: %d, rows %v", r.StatusCode, auditRows(t, in))
	}
	lr := form(testToken)
	var ck string
	for _, c := range lr.Cookies() {
		if c.Name == "sb_session" {
			ck = c.Name + "=" + c.Value
		}
	}
	if lr.StatusCode != 303 || ck == "" {
		t.Fatalf("login: %d", lr.StatusCode)
	}
	if r, _ := do(t, "GET", in.URL+"/login?token="+testToken, "", ""); r.StatusCode != 303 {
		t.Fatalf("login link: %d", r.StatusCode)
	}
	if r, _ := do(t, "POST", in.URL+"/logout", "", "", "Cookie", ck, "Origin", in.URL); r.StatusCode != 303 {
		t.Fatalf("logout: %d", r.StatusCode)
	}
	if _, err := pool.Exec(t.Context(), `INSERT INTO telegram_pairings (user_id, chat_id, display_name, code, timeline_scope, expires_at)
		VALUES (77, 77, 'Ann', 'QRS234', 'tg:77', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if r, b := do(t, "POST", in.URL+"/api/pairings/approve", testToken, `{"code":"qrs234"}`); r.StatusCode != 200 {
		t.Fatalf("approve pairing: %d %s", r.StatusCode, b)
	}
	var rule struct{ ID int64 }
	r, b := do(t, "POST", in.URL+"/api/rules", testToken, `{"text":"Answer in French."}`)
	if r.StatusCode != 201 || json.Unmarshal([]byte(b), &rule) != nil {
		t.Fatalf("create rule: %d %s", r.StatusCode, b)
	}
	if r, b := do(t, "DELETE", fmt.Sprintf("%s/api/rules/%d?version=1", in.URL, rule.ID), testToken, ""); r.StatusCode != 204 {
		t.Fatalf("delete rule: %d %s", r.StatusCode, b)
	}
	var sc services.Schedule
	r, b = do(t, "POST", in.URL+"/api/schedules", testToken, `{"name":"Tickets","task":"check the box office","every":"1h"}`)
	if r.StatusCode != 201 || json.Unmarshal([]byte(b), &sc) != nil {
		t.Fatalf("create schedule: %d %s", r.StatusCode, b)
	}
	if r, b := do(t, "PATCH", fmt.Sprintf("%s/api/schedules/%d", in.URL, sc.ID), testToken, fmt.Sprintf(`{"version":%d,"state":"paused"}`, sc.Version)); r.StatusCode != 200 {
		t.Fatalf("pause schedule: %d %s", r.StatusCode, b)
	}
	if r, b := do(t, "DELETE", fmt.Sprintf("%s/api/schedules/%d", in.URL, sc.ID), testToken, ""); r.StatusCode != 200 {
		t.Fatalf("delete schedule: %d %s", r.StatusCode, b)
	}

	rows := auditRows(t, in)
	var got []string
	for _, e := range rows {
		got = append(got, e.Action+"/"+e.Status+"/"+e.Channel+"/"+e.Subject)
		if strings.Contains(string(e.Detail), testToken) || strings.Contains(strings.ToUpper(string(e.Detail)), "QRS234") {
			t.Fatalf("a secret in audit row %d: %s", e.ID, e.Detail)
		}
	}
	want := []string{"login/ok/web/owner", "login/ok/web/owner", "logout/ok/web/owner", "pairing/approved/api/telegram user 77",
		fmt.Sprintf("rule_change/added/api/rule %d", rule.ID), fmt.Sprintf("rule_change/removed/api/rule %d", rule.ID),
		fmt.Sprintf("schedule_change/created/api/schedule %d", sc.ID), fmt.Sprintf("schedule_change/paused/api/schedule %d", sc.ID),
		fmt.Sprintf("schedule_change/deleted/api/schedule %d", sc.ID)}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(string(rows[0].Detail), `"method": "form"`) || !strings.Contains(string(rows[1].Detail), `"method": "link"`) ||
		rows[4].TimelineScope != services.DefaultTimeline || !strings.Contains(string(rows[4].Detail), "Answer in French.") {
		t.Fatalf("details: %s | %s | %+v", rows[0].Detail, rows[1].Detail, rows[4])
	}

	// The debug API pages newest first.
	var page struct {
		Entries    []services.AuditEntry `json:"entries"`
		NextBefore int64                 `json:"next_before"`
	}
	if st := getJSON(t, in.URL+"/api/debug/audit?limit=5", &page); st != 200 || len(page.Entries) != 5 || page.Entries[0].ID != rows[8].ID ||
		page.Entries[4].ID != rows[4].ID || page.NextBefore != rows[4].ID {
		t.Fatalf("first page: %d %+v", st, page)
	}
	before := page.NextBefore
	page.Entries, page.NextBefore = nil, -1
	if st := getJSON(t, fmt.Sprintf("%s/api/debug/audit?limit=5&before=%d", in.URL, before), &page); st != 200 || len(page.Entries) != 4 ||
		page.Entries[3].ID != rows[0].ID || page.NextBefore != 0 {
		t.Fatalf("second page: %d %+v", st, page)
	}
	if r, _ := do(t, "GET", in.URL+"/api/debug/audit", "", ""); r.StatusCode != 401 {
		t.Fatalf("audit without credentials: %d", r.StatusCode)
	}
	if r, _ := do(t, "GET", in.URL+"/api/debug/audit?limit=x", testToken, ""); r.StatusCode != 400 {
		t.Fatalf("bad limit: %d", r.StatusCode)
	}
	if n, broken, err := in.Store.VerifyAudit(t.Context()); n != 9 || broken != nil || err != nil {
		t.Fatalf("verify: %d %+v %v", n, broken, err)
	}
}

// TestDebugPageShowsAuditTrail: the debug page lists the audit trail newest
// first, 50 rows at a time, the login that opened it on top, and loads
// older rows on demand.
func TestDebugPageShowsAuditTrail(t *testing.T) {
	t.Parallel()
	in := newOpsInstance(t, false)
	for i := range 55 {
		if _, err := in.Store.AppendAudit(t.Context(), services.AuditEntry{Actor: "agent", Action: services.AuditToolCall,
			Subject: fmt.Sprintf("tool_%d", i), Status: "ok", Detail: json.RawMessage(`{"url": "<b>x</b>"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	poll := func(expr string) error {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second)))
		return err
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(in.URL+"/login?token="+testToken),
		chromedp.Navigate(in.URL+"/debug")); err != nil {
		t.Fatal(err)
	}
	if err := poll(`document.querySelectorAll("#audit tbody tr").length === 50`); err != nil {
		t.Fatalf("first page of the audit trail: %v", err)
	}
	first, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#audit tbody tr").dataset.action`))
	if first != services.AuditLogin {
		t.Fatalf("newest row shown first: %q; want the login", first)
	}
	if bold, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#audit b").length`)); bold != 0 {
		t.Fatal("audit detail parsed as HTML")
	}
	if err := chromedp.Do(ctx, chromedp.Click("#audit-more")); err != nil {
		t.Fatal(err)
	}
	if err := poll(`document.querySelectorAll("#audit tbody tr").length === 56 && document.getElementById("audit-more").hidden`); err != nil {
		t.Fatalf("older entries: %v", err)
	}
	last, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#audit tbody tr")].pop().cells[5].textContent`))
	if last != "tool_0" {
		t.Fatalf("oldest row last: %q", last)
	}
}
