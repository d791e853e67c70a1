package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestDebugPageShowsFireReceipts: the debug page shows each fire of a
// watch schedule with its receipt and the tokens it spent: the first look
// ran (tokens), the next fire found the page unchanged (0 tokens).
func TestDebugPageShowsFireReceipts(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><p>No tickets yet.</p><p>Served at %s</p></body></html>`, time.Now().Format(time.RFC3339Nano))
	}))
	t.Cleanup(page.Close)
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), "Scheduled task") {
			return llmtest.Text(`{"news": false, "message": ""}`)
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Token: testToken, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) { o.Fetch.Allow = []string{"127.0.0.1"} }})
	body := `{"name":"Tickets","task":"Tell me when tickets appear","every":"1h","watch":{"url":"` + page.URL + `","ignore":["Served at \\S+"]}}`
	req, _ := http.NewRequest("POST", in.URL+"/api/schedules", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	for n := 1; n <= 2; n++ {
		// The hourly fire's job is made available now.
		var made int64
		var err error
		finished := pollEvery(30*time.Second, 50*time.Millisecond, func() bool {
			tag, e := in.App.Pool().Exec(context.Background(), `UPDATE river_job SET state = 'available', scheduled_at = now()
				WHERE kind = 'schedule_fire' AND state = 'scheduled'`)
			if err = e; err != nil {
				return true
			}
			made = tag.RowsAffected()
			var done int
			_ = in.App.Pool().QueryRow(context.Background(), `SELECT count(*) FROM schedule_fires WHERE status <> 'running'`).Scan(&done)
			return done >= n
		})
		if err != nil {
			t.Fatal(err)
		}
		if !finished {
			t.Fatalf("fire %d did not finish (%d rows made available)", n, made)
		}
	}
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(in.URL+"/login?token="+testToken),
		chromedp.Navigate(in.URL+"/debug"),
		chromedp.WaitVisible(`#schedules tr[data-schedule] .fire.status-unchanged`),
	); err != nil {
		t.Fatal(err)
	}
	// What a person sees: the row's rendered text.
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#schedules tr[data-schedule]").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "unchanged · 0 tok") || !strings.Contains(text, "ran · ") || strings.Contains(text, "ran · 0 tok") {
		t.Fatalf("the schedule's row: %q", text)
	}
}
