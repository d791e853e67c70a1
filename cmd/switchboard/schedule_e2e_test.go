package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestMonitorEndToEnd is the whole monitor flow through real processes:
// the owner asks on Telegram (the strict Bot API test server) for a local
// page to be watched every 2 seconds; the scripted model schedules it; the
// page changes after a few fires; exactly one notification reaches the web
// page (Chromium), the TUI (tmux) and the Telegram chat while later fires
// find the same; no fire's step appears in any main prompt (the fake
// model's request log) and the monitor's scope holds its earlier findings.
func TestMonitorEndToEnd(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	var hits atomic.Int64
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if hits.Add(1) >= 3 {
			fmt.Fprint(w, `<html><body><h1>Box office</h1><p><b>Tickets available</b> from today.</p></body></html>`)
			return
		}
		fmt.Fprint(w, `<html><body><h1>Box office</h1><p>No tickets yet.</p></body></html>`)
	}))
	t.Cleanup(page.Close)
	url := page.URL + "/tickets"
	strict := tgtest.StartStrict(t, tgToken)
	model := llmtest.NewServer(t)
	// schedule and fetch_url are deferred (TOOLS_DEFER_OVER's default):
	// named without find_tools, the first call loads them and the model
	// calls again.
	schedule := llmtest.Call("schedule", `{"name":"Tickets","task":"Fetch `+url+` and tell me whether tickets are available","every":"2s"}`)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		fire := strings.Contains(string(r.Body), "Scheduled task")
		loaded := r.LastIsToolResult && strings.Contains(r.LastMessage, `"status":"loaded"`)
		switch {
		case fire && (!r.LastIsToolResult || loaded):
			return llmtest.Call("fetch_url", `{"url":"`+url+`"}`)
		case loaded:
			return schedule
		case fire && strings.Contains(r.LastMessage, "Tickets available"):
			return llmtest.Text("Tickets are available now at " + url)
		case fire:
			return llmtest.Text("NOTHING_NEW")
		case r.LastIsToolResult:
			return llmtest.Text("Done: I check it every 2 seconds and will tell you when tickets appear.")
		}
		return llmtest.Echo(r)
	})
	model.Enqueue(schedule)

	const token = "e2e-monitor-owner-token-0123456789"
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	startServeAt(t, bin, db, addr, "WEB_AUTH_TOKEN="+token, "LLM_PROVIDER=openai", "LLM_BASE_URL="+model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-test", "FETCH_ALLOW=127.0.0.1", "SCHEDULE_MIN_INTERVAL=1s",
		"AGENT_CONTEXT_SCOPED_WRITE=1", "AGENT_CONTEXT_SCOPED_READ=1",
		"TELEGRAM_BOT_TOKEN="+strict.Token, "TELEGRAM_OWNER_IDS=1", "TELEGRAM_API_URL="+strict.URL)

	browser := browsertest.Browser(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 3*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/login?token="+token), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	tm := newTmux(t, 110, 30, fmt.Sprintf("%q tui --url %q --token %q; sleep 600", bin, base, token))
	tm.waitFor("the TUI live", func(s string) bool { return strings.Contains(statusLine(s), "● live") })

	owner := tgtest.User{ID: 1, FirstName: "Owner"}
	strict.Send(owner, "Check "+url+" every 2 seconds and tell me when tickets appear")
	const note = "Tickets are available now"
	tgCount := func() (n int) {
		for _, m := range strict.Messages(1) {
			if strings.Contains(m.Text, note) {
				n++
			}
		}
		return n
	}
	waitLong(t, "the notification on Telegram", func() bool { return tgCount() > 0 })
	tm.waitFor("the notification in the TUI", func(s string) bool { return strings.Contains(s, note) })
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector('li.msg[data-source="schedule"]')`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the notification did not reach the page: %v", err)
	}
	seen := hits.Load()
	waitLong(t, "three more fires", func() bool { return hits.Load() >= seen+3 })
	time.Sleep(time.Second) // why kept: asserts those fires notify NO ONE (notify-on-change); a notification that must not come has no signal; real processes and a browser, not a bubble

	if n := tgCount(); n != 1 {
		t.Errorf("Telegram got the notification %d times", n)
	}
	screen := tm.waitFor("the TUI screen", func(string) bool { return true })
	if n := strings.Count(screen, note); n != 1 {
		t.Errorf("the TUI shows the notification %d times:\n%s", n, screen)
	}
	if strings.Contains(screen, "fetch_url") {
		t.Errorf("the TUI shows a fire's step:\n%s", screen)
	}
	onPage, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('li.msg[data-source="schedule"]').length`))
	if err != nil || onPage != 1 {
		t.Errorf("the page shows %d notifications (%v)", onPage, err)
	}

	// The owner asks about it on the web: the main agent sees the
	// notification, and no main prompt ever carried a fire's step.
	postAsWeb(t, base, token, "what did the monitor find?")
	waitLong(t, "the main answer", func() bool {
		r := model.Requests()
		return strings.Contains(r[len(r)-1].LastMessage, "what did the monitor find?")
	})
	var fires, withHistory int
	for _, r := range model.Requests() {
		body := string(r.Body)
		if strings.Contains(body, "Scheduled task") {
			fires++
			if strings.Count(body, "Scheduled task") > 1 && strings.Contains(body, "No tickets yet") {
				withHistory++
			}
			continue
		}
		for _, leak := range []string{"No tickets yet", "NOTHING_NEW", "Box office"} {
			if strings.Contains(body, leak) {
				t.Fatalf("a main prompt carries a fire's step (%q): %.600s", leak, body)
			}
		}
	}
	last := model.Requests()[model.RequestCount()-1]
	if !strings.Contains(string(last.Body), note) {
		t.Errorf("the main agent does not see the notification: %.600s", last.Body)
	}
	if withHistory == 0 || fires < 10 {
		t.Errorf("%d fire requests, %d reading earlier fires", fires, withHistory)
	}
	var findings int
	if err := dbtest.PoolFor(t, db).QueryRow(context.Background(),
		`SELECT count(*) FROM chat_messages WHERE context_scope LIKE 'sched:%' AND visible = 0 AND content LIKE '%No tickets yet%'`).Scan(&findings); err != nil || findings < 2 {
		t.Errorf("the monitor's scope holds %d earlier findings (%v)", findings, err)
	}
	// What the owner saw, for the docs.
	for _, m := range strict.Messages(1) {
		t.Logf("telegram: %q", m.Text)
	}
	t.Logf("tui:\n%s", screen)
}
