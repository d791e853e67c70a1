package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestImagesKeepTheNewestMessageInView: at phone size, a timeline whose
// last messages carry pictures opens at its newest message, and it stays
// in view after the pictures have loaded and grown the page above it.
func TestImagesKeepTheNewestMessageInView(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Token: testToken})
	ctx := context.Background()
	for i := range 25 {
		if _, _, err := in.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceSystem,
			Role: services.RoleAssistant, Content: fmt.Sprintf("Earlier note %d.", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var pic bytes.Buffer
	_ = png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 400, 300)))
	path := filepath.Join(t.TempDir(), "pic.png")
	if err := os.WriteFile(path, pic.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	browser := browsertest.Shared(t)
	bctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	for i, answer := range []string{"A first picture.", "The last answer."} {
		model.Enqueue(llmtest.Text(answer))
		if err := chromedp.Do(bctx, chromedp.SetUploadFiles("#attach", []string{path}), chromedp.WaitVisible("#files .chip"),
			chromedp.SendKeys("#input", fmt.Sprintf("picture %d", i)), chromedp.Click("#send")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](fmt.Sprintf(`[...document.querySelectorAll("li.msg.assistant")].some(li => li.textContent.includes(%q))`, answer),
			chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("answer %q: %v", answer, err)
		}
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(in.URL+"/"), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	const inView = `(() => {
		const imgs = [...document.querySelectorAll("li.msg .attachments img.thumb")];
		const last = [...document.querySelectorAll("li.msg")].pop();
		if (imgs.length < 2 || imgs.some(i => !i.complete || !i.naturalWidth) || !last || !last.textContent.includes("The last answer.")) return "loading";
		const box = document.getElementById("scroller").getBoundingClientRect(), r = last.getBoundingClientRect();
		return r.bottom <= box.bottom + 1 && r.top >= box.top ? "in view" : "last message at " + r.top + "–" + r.bottom + ", view " + box.top + "–" + box.bottom;
	})()`
	// Polled until the pictures have loaded, then two frames more for the
	// page to settle after their growth.
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`(`+inView+`) !== "loading"`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the pictures did not load: %v", err)
	}
	settle := chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise)
	if _, err := chromedp.Run(bctx, settle); err != nil {
		t.Fatal(err)
	}
	if got, err := chromedp.Run(bctx, chromedp.Evaluate[string](inView)); err != nil || got != "in view" {
		t.Fatalf("after the pictures loaded: %s (%v)", got, err)
	}
	// A picture that arrives late (a slow network, no cache) grows the
	// page above the newest message after it was placed: it stays in view.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { document.querySelector("li.msg .attachments img.thumb").style.minHeight = "30rem"; return true })()`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, settle); err != nil {
		t.Fatal(err)
	}
	if got, err := chromedp.Run(bctx, chromedp.Evaluate[string](inView)); err != nil || got != "in view" {
		t.Fatalf("after a picture above it grew: %s (%v)", got, err)
	}
}
