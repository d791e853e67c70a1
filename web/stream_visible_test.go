package web_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// visibleJS(el) says why an element is not visible to a person, or ""
// when it is: connected, not hidden by itself or an ancestor (hidden
// attribute, display:none, visibility, opacity), with a non-zero box, its
// text drawn (the text's own rectangles are non-zero) and inside the
// scrolling timeline's visible area.
const visibleJS = `function whyHidden(e) {
  if (!e || !e.isConnected) return "not in the page";
  for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
    const s = getComputedStyle(n);
    const name = n.tagName.toLowerCase() + (n.className ? "." + String(n.className).trim().replace(/\s+/g, ".") : "");
    if (n.hidden) return name + " has the hidden attribute";
    if (s.display === "none") return name + " is display:none";
    if (s.visibility !== "visible") return name + " is visibility:" + s.visibility;
    if (Number(s.opacity) === 0) return name + " has opacity 0";
  }
  if (e.checkVisibility && !e.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) return "checkVisibility() is false";
  const r = e.getBoundingClientRect();
  if (r.width < 1 || r.height < 1) return "its box is " + r.width + "x" + r.height;
  const range = document.createRange();
  range.selectNodeContents(e);
  const t = range.getBoundingClientRect();
  if (t.width < 1 || t.height < 1) return "its text's box is " + t.width + "x" + t.height;
  const sc = document.getElementById("scroller").getBoundingClientRect();
  if (t.bottom <= sc.top || t.top >= sc.bottom || t.right <= sc.left || t.left >= sc.right) return "its text is outside the visible timeline";
  return "";
}`

// TestStreamingAnswerIsVisible: in the middle of a slow stream, on desktop
// and phone sizes, the text written so far is on screen for a person to
// read: not only in the DOM, but rendered with a box, inside the visible
// timeline, hidden by nothing. Screenshots of both sizes go to
// docs/screenshots.
func TestStreamingAnswerIsVisible(t *testing.T) {
	t.Parallel()
	answer := "Streaming words arrive one by one so the reader can follow the answer while the model is still writing it, " +
		"and every word should be readable on the page long before the last one comes in at the very end of it all"
	model := llmtest.NewServer(t)
	for range 2 {
		model.Enqueue(llmtest.Reply{Text: answer, FragmentDelay: 150 * time.Millisecond})
	}
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, model)
	browser := browsertest.Shared(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"mobile", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h),
				chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online"),
				chromedp.SendKeys("#input", "write slowly ("+size.name+")"), chromedp.Click("#send")); err != nil {
				t.Fatal(err)
			}
			// Wait until a few words have streamed, then read, in one
			// snapshot, the text and whether it can be seen.
			snap, err := chromedp.Run(ctx, chromedp.Poll[[]string](`(() => { `+visibleJS+`
				const b = document.querySelector("li.msg.streaming .body");
				if (!b || b.textContent.trim().split(/\s+/).length < 6) return null;
				return [b.textContent, whyHidden(b), whyHidden(b.querySelector("p") || b)];
			})()`, chromedp.WithPollingTimeout(20*time.Second)))
			if err != nil {
				t.Fatalf("no streamed text in the page: %v", err)
			}
			text, why, whyP := snap[0], snap[1], snap[2]
			if strings.TrimSpace(text) == answer || !strings.HasPrefix(answer, strings.TrimSpace(text)) {
				t.Fatalf("not mid-stream: streamed %q", text)
			}
			if why != "" || whyP != "" {
				t.Fatalf("the streamed text %q is in the page but not visible: %s %s", text, why, whyP)
			}
			shoot(t, ctx, "chat-streaming-"+size.name+".png", size.w, size.h)
			// Still streaming after the screenshot, and still visible.
			still, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { `+visibleJS+`
				const b = document.querySelector("li.msg.streaming .body"); return b ? whyHidden(b) : "gone" })()`))
			if err != nil || (still != "" && still != "gone") {
				t.Fatalf("streamed text after the screenshot: %q %v", still, err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.querySelector("li.msg.streaming") && [...document.querySelectorAll("li.msg.assistant .body")].some(b => b.textContent.includes("very end of it all"))`,
				chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				t.Fatalf("the stored answer did not replace the stream: %v", err)
			}
		})
	}
}

// TestRawHTMLLinesVisibleOnThePage: an answer with a line holding a
// block-level tag shows that tag as text and every line after it, on the
// page in Chromium (not hidden, with a box), and nothing of it runs.
func TestRawHTMLLinesVisibleOnThePage(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Text("Here it is:\n<div>\nthe first plain line\nthe second plain line\n</div>\n<script>window.__xss = 1</script>\nand the last line"))
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, model)
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online"),
		chromedp.SendKeys("#input", "show html"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("li.msg.assistant:not(.streaming) .body.md")].some(b => b.textContent.includes("Here it is"))`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the answer did not arrive: %v", err)
	}
	for _, phrase := range []string{"<div>", "the first plain line", "the second plain line", "</div>", "<script>window.__xss = 1</script>", "and the last line"} {
		why, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { `+visibleJS+`
			const body = [...document.querySelectorAll("li.msg.assistant:not(.streaming) .body.md")].find(b => b.textContent.includes("Here it is"));
			const w = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
			for (let n = w.nextNode(); n; n = w.nextNode()) {
				const i = n.data.indexOf(`+jsString(phrase)+`);
				if (i < 0) continue;
				const why = whyHidden(n.parentElement);
				if (why) return why;
				const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + `+jsString(phrase)+`.length);
				const b = r.getBoundingClientRect();
				return b.width >= 1 && b.height >= 1 ? "" : "its box is " + b.width + "x" + b.height;
			}
			return "not in the page: " + body.innerHTML })()`))
		if err != nil || why != "" {
			t.Errorf("%q is not visible: %s %v", phrase, why, err)
		}
	}
	if ran, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss !== undefined || !!document.querySelector("#timeline script, #timeline div:not([class])")`)); ran {
		t.Error("raw HTML in the answer became markup")
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestIconsNeedNoEmojiFont: the attach button, a file waiting to be sent
// and a file in the timeline show drawn (SVG) icons with a visible box,
// and no text on the page needs an emoji font (no character that
// defaults to emoji presentation).
func TestIconsNeedNoEmojiFont(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	in := newInstanceWithModel(t, pool, nil)
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("some notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	iconShown := func(what, sel string) {
		t.Helper()
		why, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { `+visibleJS+`
			const s = document.querySelector(`+jsString(sel)+`);
			if (!s) return "no svg icon: " + document.body.innerHTML.slice(0, 2000);
			for (let n = s; n && n.nodeType === 1; n = n.parentElement) if (n.hidden || getComputedStyle(n).display === "none" || getComputedStyle(n).visibility !== "visible") return "hidden";
			const r = s.getBoundingClientRect();
			if (r.width < 10 || r.height < 10) return "its box is " + r.width + "x" + r.height;
			return s.querySelectorAll("path").length ? "" : "no drawing" })()`))
		if err != nil || why != "" {
			t.Errorf("%s: %s %v", what, why, err)
		}
	}
	noEmoji := func(when string) {
		t.Helper()
		if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.body.innerText.match(/\p{Emoji_Presentation}/gu) || []).join(" ")`)); got != "" {
			t.Errorf("%s: the page shows emoji glyphs %q", when, got)
		}
	}
	iconShown("attach button", "label.attach svg.icon")
	noEmoji("empty page")
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles("#attach", []string{file}), chromedp.WaitVisible("#files .chip")); err != nil {
		t.Fatal(err)
	}
	iconShown("file chip", "#files .chip svg.icon")
	if err := chromedp.Do(ctx, chromedp.SendKeys("#input", "a file"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector("li.msg.user .attachments a.file")`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the file is not shown in the timeline: %v", err)
	}
	iconShown("file in the timeline", "li.msg.user .attachments a.file svg.icon")
	noEmoji("with a file")
}
