package web_test

import (
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestScheduleNotificationArrivesLiveOnce: with the chat page open in
// Chromium, a monitor's notification appears live, once, labelled as a
// schedule and named after it, rendered as Markdown; later fires that find
// the same add nothing to the page.
func TestScheduleNotificationArrivesLiveOnce(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	var fires atomic.Int64
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), "Scheduled task") {
			fires.Add(1)
			return llmtest.Text("Tickets are **on sale**.")
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Token: testToken, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) { o.Schedule.Limits.MinInterval = time.Second }})
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", in.URL+"/api/schedules", strings.NewReader(`{"name":"Tickets","task":"check the box office","every":"1s"}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector('li.msg[data-source="schedule"]')`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the notification did not arrive live: %v", err)
	}
	seen := fires.Load()
	// Two more fires (their notifications would be on the page by the
	// time the next fire calls the model); the page check below says
	// what is wrong if they do not come.
	pollEvery(30*time.Second, 100*time.Millisecond, func() bool { return fires.Load() >= seen+2 })
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const all = document.querySelectorAll('li.msg[data-source="schedule"]');
		if (all.length !== 1) return "count " + all.length;
		const li = all[0];
		if (li.querySelector("details.tools")) return "a fire's steps are shown";
		return [li.querySelector(".label").textContent, li.querySelector(".who").textContent,
			li.querySelector(".body strong") ? li.querySelector(".body").textContent.trim() : "not rendered",
			li.querySelector(".body svg.icon-clock") ? "clock icon" : "no clock icon"].join("|");
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "schedule|Tickets|Tickets") || !strings.HasSuffix(got, "|clock icon") {
		t.Fatalf("notification on the page: %q", got)
	}
	if !strings.Contains(got, "Tickets are on sale.") {
		t.Fatalf("notification text: %q", got)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		shoot(t, ctx, "chat-schedule.png", 1000, 420)
	}
}
