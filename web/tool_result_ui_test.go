package web_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/mcp"
	"github.com/switchboard/switchboard/services/mcp/mcptest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestToolResultsShownOnThePage: in Chromium, at desktop and phone sizes,
// each finished tool call under an answer opens, folded at first, to what
// it returned, and a person can see it (rendered, non-zero box, hidden by
// nothing, in the visible timeline): a file's text with the owner's token
// masked as [secret] and cut at 8 KiB with a line saying how much more
// there was, and the PNG an MCP tool (server-everything's get-tiny-image)
// returned as an image, loaded, not "[image 1, image/png, … bytes]". The
// message typed on the page is labelled web. GET /api/runs/:run/tools/:call
// finds nothing of an unknown call.
func TestToolResultsShownOnThePage(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Token: testToken, Configure: func(o *app.Config) {
		o.MCP = mcp.Config{"everything": mcptest.Everything(t)}
	}})
	if !pollEvery(60*time.Second, 100*time.Millisecond, func() bool {
		_, servers := in.App.Tools().ToolCatalog()
		return len(servers) == 1 && servers[0].State == "ready"
	}) {
		t.Fatal("server-everything did not start")
	}
	var long strings.Builder
	long.WriteString("owner token: " + testToken + "\n")
	for i := 1; long.Len() < 12000; i++ {
		fmt.Fprintf(&long, "line %d of the notes, long enough to need a cut\n", i)
	}
	write, _ := json.Marshal(map[string]string{"path": "notes.txt", "content": long.String()})
	for range 2 {
		model.Enqueue(llmtest.Call("write_file", string(write)), llmtest.Call("read_file", `{"path":"notes.txt"}`),
			llmtest.Call("everything__get-tiny-image", `{}`), llmtest.Text("Here are the notes and the image."))
	}
	browser := browsertest.Shared(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"mobile", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 90*time.Second)
			q := "show me the notes (" + size.name + ")"
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h),
				chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online"),
				chromedp.SendKeys("#input", q), chromedp.Click("#send")); err != nil {
				t.Fatal(err)
			}
			ans := `[...document.querySelectorAll("li.msg.assistant:not(.streaming)")].find(li => li.querySelector(".body").textContent.includes("notes and the image") && li.querySelector(".replyto") && li.querySelector(".replyto").textContent.includes("` + q + `"))`
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const a = `+ans+`; return !!a && a.querySelectorAll("li.tool.has-result").length === 3 })()`,
				chromedp.WithPollingTimeout(45*time.Second))); err != nil {
				dump, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("timeline").innerText`))
				t.Fatalf("the answer with three tool calls did not arrive: %v\n%s", err, dump)
			}
			label, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("li.msg.user")].find(li => li.querySelector(".body").textContent === "`+q+`").querySelector(".label").textContent`))
			if err != nil || label != "web" {
				t.Errorf("the typed message is labelled %q (%v), want web", label, err)
			}
			folded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const a = `+ans+`; return [...a.querySelectorAll("details.tresult")].every(d => !d.open) && !a.querySelector(".ttext") })()`))
			if err != nil || !folded {
				t.Errorf("a result is open or loaded before anyone asked (%v)", err)
			}
			// A person opens the tool calls, then two results.
			open := func(tool string) string {
				return `(() => { const a = ` + ans + `; a.querySelector("details.tools").open = true;
					const line = [...a.querySelectorAll("li.tool")].find(l => l.querySelector(".tname").textContent === "` + tool + `");
					line.querySelector("details.tresult > summary").click(); return true })()`
			}
			for _, tool := range []string{"read_file", "everything__get-tiny-image"} {
				if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](open(tool))); err != nil {
					t.Fatal(err)
				}
			}
			text, err := chromedp.Run(ctx, chromedp.Poll[[]string](`(() => { `+visibleJS+`
				const a = `+ans+`;
				const line = [...a.querySelectorAll("li.tool")].find(l => l.querySelector(".tname").textContent === "read_file");
				const pre = line.querySelector(".ttext"), more = line.querySelector(".tmore");
				if (!pre || !more) return null;
				pre.scrollIntoView({ block: "center" });
				return [pre.textContent, whyHidden(pre), more.textContent, whyHidden(more)];
			})()`, chromedp.WithPollingTimeout(15*time.Second)))
			if err != nil {
				t.Fatalf("the read_file result did not show: %v", err)
			}
			if text[1] != "" || text[3] != "" {
				t.Errorf("the result text is not visible: %q; its cut note: %q", text[1], text[3])
			}
			if strings.Contains(text[0], testToken) || !strings.Contains(text[0], "owner token: [secret]") || !strings.Contains(text[0], "line 3 of the notes") ||
				len(text[0]) > 8<<10 {
				t.Errorf("result text (%d bytes): %.300q", len(text[0]), text[0])
			}
			if !strings.Contains(text[2], "the agent read all of them") {
				t.Errorf("cut note %q", text[2])
			}
			img, err := chromedp.Run(ctx, chromedp.Poll[[]string](`(() => { `+visibleJS+`
				const a = `+ans+`;
				const line = [...a.querySelectorAll("li.tool")].find(l => l.querySelector(".tname").textContent === "everything__get-tiny-image");
				const im = line.querySelector(".tbody img");
				if (!im || !im.complete) return null;
				im.scrollIntoView({ block: "center" });
				const r = im.getBoundingClientRect(), s = document.getElementById("scroller").getBoundingClientRect();
				let why = whyHidden(im);
				if (why === "its text's box is 0x0") why = ""; // an image has no text
				if (!why && (r.bottom <= s.top || r.top >= s.bottom)) why = "outside the visible timeline";
				return [String(im.naturalWidth), String(r.width) + "x" + String(r.height), why, im.getAttribute("src"), line.querySelector(".ttext").textContent];
			})()`, chromedp.WithPollingTimeout(15*time.Second)))
			if err != nil {
				t.Fatalf("the MCP image did not show: %v", err)
			}
			if img[0] == "0" || img[2] != "" || !strings.HasPrefix(img[3], "/api/attachments/") {
				t.Errorf("image: natural width %s, box %s, hidden: %q, src %s", img[0], img[1], img[2], img[3])
			}
			if !strings.Contains(img[4], "[image 1, image/png") {
				t.Errorf("the image's result text: %q", img[4])
			}
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`)); err != nil {
				t.Fatal(err)
			}
			wide, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
			if wide {
				t.Errorf("the page scrolls sideways with a result open")
			}
			if os.Getenv("UPDATE_SCREENSHOTS") != "" {
				if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { `+ans+`.querySelector("li.tool.has-result").scrollIntoView({ block: "start" }); return true })()`)); err != nil {
					t.Fatal(err)
				}
				shoot(t, ctx, "tool-result-"+size.name+".png", size.w, size.h)
			}
		})
	}
	resp, body := do(t, "GET", in.URL+"/api/runs/1/tools/no-such-call", testToken, "")
	if resp.StatusCode != 404 || !strings.Contains(body, `no-such-call`) {
		t.Errorf("unknown call: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "GET", in.URL+"/api/runs/x/tools/c", testToken, ""); resp.StatusCode != 400 {
		t.Errorf("bad run id: %d %s", resp.StatusCode, body)
	}
}
