package web_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// mdAnswer is what a model writes: a list, a table, code, a link.
const mdAnswer = "Here is the plan for the notes:\n\n" +
	"1. read the notes\n2. write the summary\n\n" +
	"| step | state |\n|---|---|\n| write notes.md | done |\n| read missing.md | not found |\n\n" +
	"```go\nfunc summarise(notes []string) string {\n\treturn strings.Join(notes, \"; \") // a < b && c > d\n}\n```\n\n" +
	"More in [the docs](https://example.test/docs)."

// plantedAnswer is what an attacker would make a model write: a script, an
// onerror image, javascript: links, raw HTML.
const plantedAnswer = "Tricks:\n\n<script>window.__xss = 1</script>\n\n" +
	"<img src=x onerror=\"window.__xss = 2\">\n\n" +
	"[click me](javascript:window.__xss=3) ![x](javascript:window.__xss=4)\n\n" +
	"<a href=\"javascript:window.__xss=5\">raw link</a> <div onclick=\"window.__xss=6\">div</div>"

// TestChatRendersAnswersAndToolWork: in Chromium, on desktop and phone
// sizes, an answer's Markdown renders (code block with highlighting and a
// copy button, list, table, link opening in a new tab) while what an
// attacker planted stays inert; the run's tool calls show live under the
// answer being written and, folded, under the answer after a reload; the
// answer names the question it replies to.
func TestChatRendersAnswersAndToolWork(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.Enqueue(
		llmtest.Call("write_file", `{"path":"notes.md","content":"meeting on Tuesday"}`),
		llmtest.Call("read_file", `{"path":"missing.md"}`),
		llmtest.Reply{Text: mdAnswer, Delay: 1500 * time.Millisecond},
		llmtest.Text(plantedAnswer))
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, model)
	browser := browsertest.Shared(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h),
				chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online")); err != nil {
				t.Fatal(err)
			}
			if size.name == "desktop" {
				if err := chromedp.Do(ctx, chromedp.SendKeys("#input", "make a plan"), chromedp.Click("#send")); err != nil {
					t.Fatal(err)
				}
				// Live: the calls appear under the answer being written.
				live, err := chromedp.Run(ctx, chromedp.Poll[string](
					`(() => { const s = document.querySelector("li.msg.streaming details.tools summary"); return s && s.textContent.includes("1 failed") ? s.textContent : null })()`,
					chromedp.WithPollingTimeout(15*time.Second)))
				if err != nil {
					t.Fatalf("tool calls not shown live: %v", err)
				}
				if !strings.HasPrefix(live, "working: ") || !strings.Contains(live, "1 failed") {
					t.Fatalf("live summary %q", live)
				}
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector("li.msg.assistant:not(.streaming) .body.md table")`,
				chromedp.WithPollingTimeout(20*time.Second))); err != nil {
				t.Fatalf("the rendered answer did not arrive: %v", err)
			}
			if size.name == "desktop" {
				// After a reload the calls come from the stored steps.
				if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(".conn.online")); err != nil {
					t.Fatal(err)
				}
			}
			if os.Getenv("UPDATE_SCREENSHOTS") != "" {
				if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector("details.tools").open = true; return true })()`)); err != nil {
					t.Fatal(err)
				}
				shoot(t, ctx, "chat-"+size.name+".png", size.w, size.h)
				if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector("details.tools").open = false; return true })()`)); err != nil {
					t.Fatal(err)
				}
			}
			if size.name == "desktop" {
				if err := chromedp.Do(ctx, chromedp.SendKeys("#input", "show me some tricks"), chromedp.Click("#send")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("li.msg.assistant .body")].some(e => e.textContent.startsWith("Tricks"))`,
				chromedp.WithPollingTimeout(20*time.Second))); err != nil {
				t.Fatalf("the planted answer did not arrive: %v", err)
			}
			check := func(what, js string) {
				t.Helper()
				ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
				if err != nil || !ok {
					t.Errorf("%s: %v (%s)", what, err, js)
				}
			}
			ans := `document.querySelector("li.msg.assistant:not(.streaming) .body.md")` // the first answer
			check("code block highlighted", ans+`.querySelector("pre.chroma span.kd") !== null`)
			check("copy button", ans+`.querySelector("button.copy") !== null`)
			check("list", ans+`.querySelectorAll("ol li").length === 2`)
			check("table", ans+`.querySelector("td").textContent === "write notes.md"`)
			check("escaped code", ans+`.querySelector("pre").textContent.includes("a < b && c > d")`)
			check("link in a new tab", `(() => { const a = `+ans+`.querySelector('a[href="https://example.test/docs"]'); return !!a && a.target === "_blank" && a.rel.includes("noopener") })()`)
			check("nothing planted ran", `window.__xss === undefined`)
			check("no script, handler or javascript: link", `!document.querySelector("#timeline script, #timeline [onerror], #timeline a[href^='javascript:'], #timeline img[src^='javascript:']")`)
			check("tool calls under the answer", `(() => { const d = document.querySelector("li.msg.assistant:not(.streaming) details.tools"); return !!d && !d.open && d.querySelector("summary").textContent === "2 tool calls, 1 failed" && d.querySelectorAll("li.tool").length === 2 && d.querySelector("li.tool.ok .tname").textContent === "write_file" && d.querySelector("li.tool.error .targ").textContent === "missing.md" })()`)
			check("a day separator", `document.querySelector("#timeline > li.day").textContent === "Today"`)
			check("names the question", `(() => { const r = document.querySelector("li.msg.assistant:not(.streaming) .replyto"); return !!r && r.textContent.includes("make a plan") })()`)
			check("page does not scroll sideways", `document.documentElement.scrollWidth <= window.innerWidth`)
			check("no blank line above a bubble's header or below its last line", `[...document.querySelectorAll("li.msg:not(.streaming)")].every(li => {
				const r = li.getBoundingClientRect(), m = li.querySelector(".meta").getBoundingClientRect(), last = li.lastElementChild.getBoundingClientRect();
				return m.top - r.top < 14 && r.bottom - last.bottom < 14 })`)
		})
	}
}

// TestCommandsAnsweredWithoutTheModel: /help lists every command (the
// rules included) and an unknown command is answered "unknown command",
// neither reaching the model.
func TestCommandsAnsweredWithoutTheModel(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, model)
	for cmd, want := range map[string]string{"/help": "/rules", "/bogus": "Unknown command /bogus. /help lists the commands.",
		"/start": "Hello! Write anything"} {
		q, _, err := in.Chat.Post(context.Background(), services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceWeb, Content: cmd})
		if err != nil {
			t.Fatal(err)
		}
		var reply string
		if !poll(15*time.Second, func() bool {
			page, _ := in.Chat.Timeline(context.Background(), services.DefaultTimeline, 0, 0, 100)
			for _, m := range page.Messages {
				if meta, _ := services.DecodeMeta(m.Metadata); meta.ReplyTo == q.ID && m.Role == services.RoleAssistant {
					reply = m.Content
				}
			}
			return strings.Contains(reply, want)
		}) {
			t.Fatalf("%s: reply %q, want it to contain %q", cmd, reply, want)
		}
	}
	if n := model.RequestCount(); n != 0 {
		t.Fatalf("the model was called %d times for commands", n)
	}
}

// TestOfflineSendIsResentOnceAndLongPastesGoAsFiles: a message sent while the
// server cannot be reached waits in the outbox, marked, and is stored
// exactly once when the server is back; a message over the limit is refused
// before sending, naming the limit, and stays in the composer.
func TestOfflineSendIsResentOnceAndLongPastesGoAsFiles(t *testing.T) {
	t.Parallel()
	dbtest.Reserve(t, twoInstanceConns) // the crashed instance's pool stays open beside the second's
	dbURL := apptest.SchemaURL(t)
	first := apptest.Start(t, apptest.Options{DatabaseURL: dbURL, Token: testToken})
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(first.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	// No model is configured: the page says so once, with what to set.
	if banner, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => { const b = document.getElementById("banner"); return b.hidden ? null : b.textContent })()`,
		chromedp.WithPollingTimeout(5*time.Second))); err != nil || !strings.Contains(banner, "LLM_PROVIDER") {
		t.Errorf("offline-model banner: %q %v", banner, err)
	}
	if hint, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("li.hint") || {}).textContent || ""`)); !strings.Contains(hint, "/help") {
		t.Errorf("empty timeline hint: %q", hint)
	}
	first.Crash() // the server is gone: every request fails
	if err := chromedp.Do(ctx, chromedp.SendKeys("#input", "written in a tunnel"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	// At once, while it is retried: the message, marked as being sent.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const p = document.querySelector("li.sending"); return !!p && p.checkVisibility() && p.textContent.includes("written in a tunnel") && p.textContent.includes("sending…") })()`,
		chromedp.WithPollingTimeout(1500*time.Millisecond))); err != nil {
		t.Fatalf("the message is not shown while it is being sent: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const p = document.querySelector("li.pending"); return !!p && !document.querySelector("li.sending") && p.textContent.includes("written in a tunnel") && p.textContent.includes("not sent yet") })()`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the unsent message is not shown as waiting: %v", err)
	}
	// On a phone the waiting bubble's header stays whole (no "WE/B") and
	// nothing scrolls sideways, offline status and all.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	layout := `(() => { const p = document.querySelector("li.pending");
		const one = (e) => e.getClientRects().length === 1 && e.getBoundingClientRect().height < 2 * parseFloat(getComputedStyle(e).fontSize);
		return [String(document.documentElement.scrollWidth <= window.innerWidth), String(one(p.querySelector(".meta .label"))),
			String(one(p.querySelector(".meta .who"))), String(one(p.querySelector(".meta time")))]; })()`
	if got, err := chromedp.Run(ctx, chromedp.Poll[[]string](layout, chromedp.WithPollingTimeout(5*time.Second))); err != nil || strings.Join(got, " ") != "true true true true" {
		t.Errorf("the waiting message on a phone (fits, label, who, time on one line): %q %v", got, err)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		shoot(t, ctx, "pending-mobile.png", 390, 844)
		shoot(t, ctx, "pending-desktop.png", 1280, 800)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	// The server is back on the same address (another process, same database).
	second := apptest.Start(t, apptest.Options{DatabaseURL: dbURL, Token: testToken, Addr: strings.TrimPrefix(first.URL, "http://")})
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.querySelector("li.pending") && [...document.querySelectorAll("li.msg.user .body")].some(e => e.textContent === "written in a tunnel")`,
		chromedp.WithPollingTimeout(40*time.Second))); err != nil {
		t.Fatalf("the message was not sent when the server came back: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // why kept: a "stored once" check after a resend: a duplicate would come from the page's outbox retrying, and nothing signals that it will not retry again; browser and server are real processes, not a bubble
	page, _ := second.Chat.Timeline(context.Background(), services.DefaultTimeline, 0, 0, 100)
	stored := 0
	for _, m := range page.Messages {
		if m.Content == "written in a tunnel" {
			stored++
		}
	}
	if stored != 1 {
		t.Fatalf("the message resent from the outbox is stored %d times, want once", stored)
	}

	long := strings.Repeat("x", 40000)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { document.getElementById("input").value = %q; document.getElementById("send").click(); return true })()`, long))); err != nil {
		t.Fatal(err)
	}
	// A paste longer than a message may be is sent as a text file, with a
	// visible line and file chip, not refused.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("li.msg.user")].some(li => {
		const b = li.querySelector(".body"), a = li.querySelector(".attachments");
		return b && b.textContent.includes("A long paste of 40,000 bytes") && a && a.textContent.includes("pasted-") && a.getBoundingClientRect().height > 0 })`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		notice, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("notice").textContent`))
		t.Fatalf("the long paste is not shown as a message with its file: %v (notice %q)", err, notice)
	}
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.getElementById("input").value.length`)); v != 0 {
		t.Fatalf("the composer still holds %d characters after the paste was sent", v)
	}
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const a = [...document.querySelectorAll("li.msg.user .attachments a")].pop(); return a ? a.getAttribute("href") : "" })()`))
	if err != nil || href == "" {
		t.Fatalf("the pasted file has no link on the page: %v", err)
	}
	if r, data := do(t, "GET", second.URL+href, testToken, ""); r.StatusCode != 200 || data != long {
		t.Fatalf("the pasted file: %d, %d bytes", r.StatusCode, len(data))
	}
}

// TestStreamingAnswerRendersAsItGrows: while an answer streams, its code
// block and bold text already render (from text nodes: markup in the
// stream stays text), and the stored answer then replaces the stream.
func TestStreamingAnswerRendersAsItGrows(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Reply{Text: "Intro with **bold** and <img src=x onerror=window.__xss=9>\n\n```\ncode line\n```\n\nand then many more words follow here slowly until the end", FragmentDelay: 120 * time.Millisecond})
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, model)
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online"),
		chromedp.SendKeys("#input", "stream please"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const b = document.querySelector("li.msg.streaming .body"); return !!b && !!b.querySelector("pre code") && b.querySelector("pre code").textContent.includes("code line") && b.querySelector("strong").textContent === "bold" })()`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the streaming answer did not render its code block: %v", err)
	}
	if bad, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss !== undefined || !!document.querySelector("li.msg.streaming img")`)); bad {
		t.Fatal("markup in the stream became HTML")
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.querySelector("li.msg.streaming") && [...document.querySelectorAll("li.msg.assistant .body.md")].some(b => b.textContent.includes("until the end"))`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the stored answer did not replace the stream: %v", err)
	}
}

// TestRetryAfterAFailedAnswer: when the model server fails, the failure
// notice on the page has a visible Retry button; pressing it asks the same
// question again (/retry) and the answer shows.
func TestRetryAfterAFailedAnswer(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Status(500, ""), llmtest.Text("Sunny, at last."))
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, model)
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online"),
		chromedp.SendKeys("#input", "what is the weather"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const b = document.querySelector("li.msg button.retry"); if (!b) return false;
		const r = b.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(b).visibility === "visible" && b.closest("li").textContent.includes("500") })()`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("no visible Retry button under the failure: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click("li.msg button.retry")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("li.msg.assistant .body")].some(b => b.textContent.includes("Sunny, at last.") && b.getBoundingClientRect().height > 0) &&
		[...document.querySelectorAll("li.msg .body")].some(b => b.textContent.startsWith("Asking again"))`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the question was not answered after Retry: %v", err)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].LastMessage, "what is the weather") {
		t.Fatalf("%d model requests; the retried one asked %q", len(reqs), reqs[len(reqs)-1].LastMessage)
	}
}
