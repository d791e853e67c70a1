package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestChatPageEndToEnd drives the real page in headless Chromium: log in,
// send a message and see it, a second browser context sees messages live,
// a reload keeps history, and messages from other channels carry labels.
func TestChatPageEndToEnd(t *testing.T) {
	in := newInstance(t, newSchemaURL(t))
	// History from other channels before anyone opens the page.
	for _, src := range []string{"telegram", "tui"} {
		if _, _, err := in.Chat.Post(t.Context(), chat.PostParams{TimelineScope: "global", Source: src, Content: "hello from " + src}); err != nil {
			t.Fatal(err)
		}
	}
	browser := browsertest.Browser(t)
	a := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	b := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	for _, ctx := range []context.Context{a, b} {
		if err := chromedp.Do(ctx,
			chromedp.Navigate(in.URL+"/"),
			chromedp.WaitVisible("#token"),
			chromedp.SendKeys("#token", testToken),
			chromedp.Click("#login"),
			chromedp.WaitVisible(".conn.online"),
		); err != nil {
			t.Fatalf("log in: %v", err)
		}
	}
	labels, err := chromedp.Run(a, chromedp.Evaluate[[]string](`[...document.querySelectorAll("li.msg .label")].map(e => e.textContent)`))
	if err != nil || strings.Join(labels, ",") != "telegram,tui" {
		t.Fatalf("history labels: %v %v", labels, err)
	}
	if older, err := chromedp.Run(a, chromedp.Evaluate[bool](`document.getElementById("older").offsetParent !== null`)); err != nil || older {
		t.Fatalf("'load older' shown with no older messages: %v %v", older, err)
	}

	// A sends; A and B both see it.
	if err := chromedp.Do(a, chromedp.SendKeys("#input", "hello from the browser"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{"a": a, "b": b} {
		if err := waitForText(ctx, "hello from the browser"); err != nil {
			t.Fatalf("%s did not show the message: %v", name, err)
		}
	}
	// A message from another channel appears live with its label.
	if _, _, err := in.Chat.Post(t.Context(), chat.PostParams{TimelineScope: "global", Source: "telegram", Content: "live from telegram"}); err != nil {
		t.Fatal(err)
	}
	if err := waitForText(b, "live from telegram"); err != nil {
		t.Fatal(err)
	}
	last, err := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector("li.msg:last-child .label").textContent`))
	if err != nil || last != "telegram" {
		t.Fatalf("live label: %q %v", last, err)
	}

	// Reload keeps history, in order, each once.
	if err := chromedp.Do(a, chromedp.Reload(), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	if err := waitForText(a, "live from telegram"); err != nil {
		t.Fatal(err)
	}
	texts, err := chromedp.Run(a, chromedp.Evaluate[[]string](`[...document.querySelectorAll("li.msg .body")].map(e => e.textContent)`))
	want := "hello from telegram|hello from tui|hello from the browser|live from telegram"
	if err != nil || strings.Join(texts, "|") != want {
		t.Fatalf("after reload: %q %v", texts, err)
	}

	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		shoot(t, a, "chat-desktop.png", 1000, 640)
		shoot(t, a, "chat-phone.png", 390, 740)
	}
}

func waitForText(ctx context.Context, text string) error {
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](
		fmt.Sprintf(`[...document.querySelectorAll("li.msg .body")].some(e => e.textContent === %q)`, text),
		chromedp.WithPollingTimeout(10*time.Second)))
	return err
}

// shoot saves a screenshot under docs/screenshots (UPDATE_SCREENSHOTS=1).
func shoot(t *testing.T, ctx context.Context, name string, w, h int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "docs", "screenshots")
	_ = os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
