package web_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/browsertest"
)

// panelVisibleJS is true when the element a selector names can be seen by a
// person: laid out with a size, inside the viewport, not hidden by style,
// and on top at its centre (not covered by another element).
const panelVisibleJS = `((sel) => { const e = document.querySelector(sel); if (!e) return false;
	const r = e.getBoundingClientRect(), s = getComputedStyle(e);
	if (r.width < 2 || r.height < 2 || s.visibility !== "visible" || s.display === "none" || Number(s.opacity) === 0) return false;
	const x = r.left + Math.min(r.width / 2, 10), y = r.top + r.height / 2;
	if (x < 0 || y < 0 || x > innerWidth || y > innerHeight) return false;
	const top = document.elementFromPoint(x, y); return !!top && (top === e || e.contains(top) || top.contains(e)); })`

// TestContextPanelPinsASectionTheModelGets: in Chromium, the owner opens
// the chat page's context panel (visible, not merely in the DOM), sees the
// next prompt's layers, lists notes.md's blocks, ticks "This week": the
// manifest gets the pin (by the section's stable id), the panel lists it
// and its retrieved layer shows the section; the owner renames the
// heading and the next message's request to the fake model still carries
// the pinned text; unticking removes the pin.
func TestContextPanelPinsASectionTheModelGets(t *testing.T) {
	t.Parallel()
	url, model, dir := ctxInstance(t)
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte(blocksDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(url+"/login?token="+testToken), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	poll := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			t.Fatalf("%s: %v (%s)", what, err, js)
		}
	}
	visible := func(sel string) string { return panelVisibleJS + `(` + jsString(sel) + `)` }

	poll("the toggle is visible", visible("#ctx-toggle"))
	if err := chromedp.Do(ctx, chromedp.Click("#ctx-toggle")); err != nil {
		t.Fatal(err)
	}
	poll("the panel and its layers are visible", visible("#ctx-panel")+` && `+visible(`#ctx-layers li[data-layer="history"] summary`))
	if err := chromedp.Do(ctx, chromedp.SendKeys("#ctx-path", "notes.md"), chromedp.Click("#ctx-show")); err != nil {
		t.Fatal(err)
	}
	box := `#ctx-blocks input[data-id="Goals/This week"]`
	poll("the block's checkbox is visible", visible(box))
	if err := chromedp.Do(ctx, chromedp.Click(box)); err != nil {
		t.Fatal(err)
	}
	// The box pins the section by its stable id (block_id), so the pin
	// outlives a renamed heading; the list names the section.
	_, body := do(t, "GET", url+"/api/workspace/blocks?path=notes.md", testToken, "")
	var fb services.FileBlocks
	if err := json.Unmarshal([]byte(body), &fb); err != nil || len(fb.Blocks) == 0 || len(fb.Blocks[0].Children) == 0 || fb.Blocks[0].Children[0].BlockID == "" {
		t.Fatalf("blocks of notes.md: %v %s", err, body)
	}
	want := "notes.md#@" + fb.Blocks[0].Children[0].BlockID
	pin := `#ctx-pins li[data-pin="` + want + `"]`
	poll("the pin is listed, visibly, with its section", visible(pin)+` && document.querySelector(`+jsString(pin)+`).textContent.includes("Goals/This week")`)
	poll("the preview's retrieved layer has the section", `(document.querySelector('#ctx-layers li[data-layer="retrieved"] pre') || {}).textContent?.includes("The pinned-section feature.") === true`)

	_, body = do(t, "GET", url+"/api/context/manifest", testToken, "")
	var man services.ContextManifest
	if err := json.Unmarshal([]byte(body), &man); err != nil || len(man.Pins) != 1 || man.Pins[0].String() != want {
		t.Fatalf("manifest after the tick (want %s): %v %s", want, err, body)
	}

	// The owner renames the heading in the file: the pin still selects it.
	renamed := strings.Replace(blocksDoc, "## This week", "## This sprint", 1)
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte(renamed), 0o600); err != nil {
		t.Fatal(err)
	}

	// The agent gets it: the next request to the model carries the text
	// (the composer is usable beside the open panel).
	poll("the send button is visible beside the panel", visible("#send")+` && `+visible("#input"))
	before := model.RequestCount()
	if err := chromedp.Do(ctx, chromedp.SendKeys("#input", "what is due this week?"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	poll("the answer arrives", `!!document.querySelector("li.msg.assistant:not(.streaming)")`)
	reqs := model.Requests()
	if len(reqs) == before || !strings.Contains(string(reqs[before].Body), "The pinned-section feature.") {
		t.Fatalf("the model's request lacks the pinned section (%d requests)", len(reqs))
	}

	// Unticking unpins.
	if err := chromedp.Do(ctx, chromedp.Click(box)); err != nil {
		t.Fatal(err)
	}
	poll("the pin is gone", `!document.querySelector(`+jsString(pin)+`)`)
	_, body = do(t, "GET", url+"/api/context/manifest", testToken, "")
	if strings.Contains(body, `"path"`) {
		t.Fatalf("manifest after the untick: %s", body)
	}
}
