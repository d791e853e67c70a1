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

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"

	"github.com/switchboard/switchboard/web/browsertest"
)

// TestChatPageEndToEnd drives the real page in headless Chromium: log in,
// send a message and see it, a second browser context sees messages live,
// a reload keeps history, and messages from other channels carry labels.
func TestChatPageEndToEnd(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newSchemaURL(t))
	// History from other channels before anyone opens the page.
	for _, src := range []services.Source{"telegram", "tui"} {
		if _, _, err := in.Chat.Post(t.Context(), services.PostParams{TimelineScope: "global", Source: src, Content: "hello from " + string(src)}); err != nil {
			t.Fatal(err)
		}
	}
	browser := browsertest.Shared(t)
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
	if _, _, err := in.Chat.Post(t.Context(), services.PostParams{TimelineScope: "global", Source: "telegram", Content: "live from telegram"}); err != nil {
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
		shoot(t, a, "chat-channels.png", 1000, 640)
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
	if os.Getenv("UPDATE_SCREENSHOTS") == "" {
		return // a test run leaves the repository's files as they are
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

// TestStreamedAnswerInBrowser: the agent's answer grows on the page while
// the model streams it, then the stored answer replaces the stream.
func TestStreamedAnswerInBrowser(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	words := strings.Fields("Once upon a time a small switchboard connected every voice in the valley and nobody was ever left without an answer again, the end")
	full := strings.Join(words, " ")
	model.Enqueue(llmtest.Reply{Text: full, FragmentDelay: 80 * time.Millisecond})
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, model)
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(in.URL+"/login?token="+testToken),
		chromedp.WaitVisible(".conn.online"),
		chromedp.SendKeys("#input", "tell me a story"),
		chromedp.Click("#send"),
	); err != nil {
		t.Fatal(err)
	}
	// A partial answer is visible while streaming, with the run's status:
	// both read in one snapshot of the page.
	snap, err := chromedp.Run(ctx, chromedp.Poll[[]string](
		`(() => { const e = document.querySelector("li.msg.streaming .body"); return e && e.textContent.split(" ").length >= 4 ? [e.textContent, document.getElementById("run").textContent] : null })()`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatalf("no streamed text: %v", err)
	}
	partial, status := snap[0], snap[1]
	if partial == full || !strings.HasPrefix(full, strings.TrimSpace(partial)) {
		t.Fatalf("streamed %q is not a strict prefix of the answer", partial)
	}
	if status != "agent is working…" {
		t.Fatalf("run status shown while streaming: %q", status)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		shoot(t, ctx, "chat-streaming.png", 1000, 560)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		fmt.Sprintf(`[...document.querySelectorAll("li.msg:not(.streaming) .body")].some(e => e.textContent === %q)`, full),
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatal("the stored answer never arrived:", err)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("li.msg.streaming").length`))
	if err != nil || n != 0 {
		t.Fatalf("stream bubble left after the final answer: %d %v", n, err)
	}
	// Exactly one answer bubble with the text.
	cnt, _ := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`[...document.querySelectorAll("li.msg .body")].filter(e => e.textContent === %q).length`, full)))
	if cnt != 1 {
		t.Fatalf("answer shown %d times", cnt)
	}
}

// TestHandoffMarkerOnThePage: a sub-agent's handoff shows as one compact
// marker line between the question and the answer.
func TestHandoffMarkerOnThePage(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case strings.Contains(string(r.Body), "You are a sub-agent"):
			return llmtest.Text("Found three sources.\nDetails follow.")
		case r.LastIsToolResult:
			return llmtest.Text("Here is what the researcher found.")
		}
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "delegate", Arguments: `{"task":"find sources"}`}}}
	})
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithAgent(t, pool, model, services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true})
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(in.URL+"/login?token="+testToken),
		chromedp.WaitVisible(".conn.online"),
		chromedp.SendKeys("#input", "research this"),
		chromedp.Click("#send"),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`[...document.querySelectorAll("li.msg:not(.streaming) .body")].some(e => e.textContent === "Here is what the researcher found.")`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatal("the stored answer never replaced the stream:", err)
	}
	marker, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => { const e = document.querySelector("li.handoff"); return e ? e.textContent : null })()`,
		chromedp.WithPollingTimeout(5*time.Second)))
	if err != nil || marker != "⇄ sub-agent finished (ok): Found three sources." {
		t.Fatalf("marker: %q %v", marker, err)
	}
	order, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#timeline > li:not(.day)")].map(e => e.className)`))
	if strings.Join(order, ",") != "msg user,handoff,msg assistant" {
		dump, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("timeline").outerHTML`))
		t.Fatalf("order on the page: %v\n%s", order, dump)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		shoot(t, ctx, "chat-handoff.png", 1000, 420)
	}
}
