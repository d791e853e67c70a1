package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestPhoneHeaderShowsItsStatusWhole: at 390×844 the header's connection
// and run status read whole ("live", "agent is working…"), not cut to
// "l…" or "age…", and no part of the header overlaps another or leaves
// the screen.
func TestPhoneHeaderShowsItsStatusWhole(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.SetLatency(3 * time.Second)
	model.Enqueue(llmtest.Text("Done."))
	in := apptest.Start(t, apptest.Options{Model: model, Token: testToken})
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online"),
		chromedp.SendKeys("#input", "take your time"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("run").textContent === "agent is working…"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("no run status: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		for (const id of ["conn", "run"]) {
			const e = document.getElementById(id);
			if (!e.checkVisibility() || e.scrollWidth > e.clientWidth) return id + " is cut: " + e.textContent + " (" + e.scrollWidth + " > " + e.clientWidth + ")";
		}
		const parts = [...document.querySelector("header").children].filter(e => e.checkVisibility() && e.getBoundingClientRect().width > 0);
		for (const a of parts) {
			const r = a.getBoundingClientRect();
			if (r.left < 0 || r.right > innerWidth) return a.className + " leaves the screen";
			for (const b of parts) {
				if (a === b) continue;
				const s = b.getBoundingClientRect();
				if (r.left < s.right - 0.5 && s.left < r.right - 0.5 && r.top < s.bottom - 0.5 && s.top < r.bottom - 0.5) return a.className + " overlaps " + b.className;
			}
		}
		return "ok";
	})()`))
	if err != nil || got != "ok" {
		t.Fatalf("phone header: %s (%v)", got, err)
	}
}
