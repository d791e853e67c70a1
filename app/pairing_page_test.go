package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestPairingCardOnThePage: in Chromium at phone size (390×844), a
// stranger's request shows in the owner's timeline live with Approve and
// Deny buttons a person can see and reach (non-zero boxes inside the
// viewport, not overlapping); pressing Approve approves it, the stranger
// is told on Telegram (the strict Bot API server), and the card says
// Approved, after a reload too.
func TestPairingCardOnThePage(t *testing.T) {
	t.Parallel()
	in, strict, _ := mediaInstance(t, nil)
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(in.URL+"/login?token="+in.Token), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	anna := tgtest.User{ID: 5151, FirstName: "Anna", Username: "anna"}
	strict.Send(anna, "hello?")
	strict.WaitMessages(anna.ID, 1, 30*time.Second)
	p, err := repository.NewTelegramStore(in.App.Pool()).PairingByUser(context.Background(), anna.ID)
	if err != nil {
		t.Fatal(err)
	}
	geometry := `(() => {
		const li = document.querySelector('li.msg[data-pairing="` + p.Code + `"]');
		if (!li) return null;
		const vis = (e) => { if (!e) return "missing"; const r = e.getBoundingClientRect(), s = getComputedStyle(e);
			if (r.width < 1 || r.height < 1) return "box " + r.width + "x" + r.height;
			if (s.display === "none" || s.visibility !== "visible") return "hidden";
			if (r.left < 0 || r.right > window.innerWidth || r.top < 0 || r.bottom > window.innerHeight) return "outside the viewport: " + JSON.stringify(r);
			return ""; };
		const a = li.querySelector(".pcard button.approve"), d = li.querySelector(".pcard button.deny");
		if (a) a.scrollIntoView({ block: "center" });
		const ra = a && a.getBoundingClientRect(), rd = d && d.getBoundingClientRect();
		const overlap = ra && rd && !(ra.right <= rd.left || rd.right <= ra.left || ra.bottom <= rd.top || rd.bottom <= ra.top);
		return [li.querySelector(".body").textContent, vis(a), vis(d), overlap ? "overlap" : "", String(document.documentElement.scrollWidth <= window.innerWidth)];
	})()`
	got, err := chromedp.Run(ctx, chromedp.Poll[[]string](geometry, chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("the pairing request did not show on the page: %v", err)
	}
	if !strings.Contains(got[0], "Anna @anna (Telegram id 5151) asks to talk to the agent") || got[1] != "" || got[2] != "" || got[3] != "" || got[4] != "true" {
		t.Fatalf("the card: %q", got)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "screenshots", "pairing-mobile.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(`li.msg[data-pairing="`+p.Code+`"] .pcard button.approve`)); err != nil {
		t.Fatal(err)
	}
	if got := strict.WaitMessages(anna.ID, 2, 30*time.Second); len(got) != 2 || !strings.Contains(got[1].Text, "The owner approved you") {
		t.Fatalf("the stranger was not told: %+v", got)
	}
	state := `(() => { const s = document.querySelector('li.msg[data-pairing="` + p.Code + `"] .pcard .pstate');
		const acts = document.querySelector('li.msg[data-pairing="` + p.Code + `"] .pcard .pactions');
		return s && s.textContent === "Approved" && acts.hidden && getComputedStyle(acts).display === "none" })()`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the card does not say Approved: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("after a reload the card does not say Approved: %v", err)
	}
}

// TestPairingsPageFromTheChat: in Chromium at phone size, the chat page's
// header links to the pairings page (visible, nothing overflowing); there
// each waiting stranger has Approve and Deny buttons a person can see;
// Deny and Approve each tell the stranger on Telegram (the strict Bot API
// server), and the page's lists follow: the approved one under Approved,
// nobody waiting.
func TestPairingsPageFromTheChat(t *testing.T) {
	t.Parallel()
	in, strict, _ := mediaInstance(t, nil)
	anna := tgtest.User{ID: 6161, FirstName: "Anna", Username: "anna"}
	bob := tgtest.User{ID: 6262, FirstName: "Bob"}
	for _, u := range []tgtest.User{anna, bob} {
		strict.Send(u, "hello?")
		strict.WaitMessages(u.ID, 1, 30*time.Second)
	}
	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 90*time.Second)
	visible := `((sel) => { const e = document.querySelector(sel); if (!e) return "missing " + sel;
		const r = e.getBoundingClientRect(), s = getComputedStyle(e);
		if (r.width < 1 || r.height < 1 || s.display === "none" || s.visibility !== "visible") return "hidden " + sel;
		if (r.left < 0 || r.right > window.innerWidth || r.top < 0 || r.bottom > window.innerHeight) return "outside the viewport " + sel;
		return ""; })`
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(in.URL+"/login?token="+in.Token), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	link := `(() => [` + visible + `("#pairings-link"), String(document.documentElement.scrollWidth <= window.innerWidth)])()`
	got, err := chromedp.Run(ctx, chromedp.Poll[[]string](link, chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil || got[0] != "" || got[1] != "true" {
		t.Fatalf("the chat page's pairings link: %q %v", got, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click("#pairings-link"), chromedp.WaitVisible("#pending li.pair")); err != nil {
		t.Fatal(err)
	}
	row := func(u tgtest.User) string {
		return `#pending li.pair:nth-child(` + map[int64]string{anna.ID: "1", bob.ID: "2"}[u.ID] + `)`
	}
	check := `(() => { const rows = [...document.querySelectorAll("#pending li.pair")].map((li) => li.querySelector(".pwho").textContent);
		return [rows.join(" | "), ` + visible + `("` + row(anna) + ` button.approve"), ` + visible + `("` + row(anna) + ` button.deny"),
			` + visible + `("` + row(bob) + ` button.approve"), String(document.documentElement.scrollWidth <= window.innerWidth)]; })()`
	got, err = chromedp.Run(ctx, chromedp.Poll[[]string](check, chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil || got[0] != "Anna @anna · Telegram id 6161 | Bob · Telegram id 6262" || got[1] != "" || got[2] != "" || got[3] != "" || got[4] != "true" {
		t.Fatalf("the pairings page: %q %v", got, err)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "screenshots", "pairings-page-mobile.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(row(anna)+" button.deny")); err != nil {
		t.Fatal(err)
	}
	if got := strict.WaitMessages(anna.ID, 2, 30*time.Second); len(got) != 2 || !strings.Contains(got[1].Text, "did not approve") {
		t.Fatalf("Anna was not told she was denied: %+v", got)
	}
	after := `(() => document.querySelectorAll("#pending li.pair").length === 1 && document.querySelector("#result").textContent.startsWith("Denied Anna"))()`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](after, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the page did not follow the denial: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#pending li.pair button.approve`)); err != nil {
		t.Fatal(err)
	}
	if got := strict.WaitMessages(bob.ID, 2, 30*time.Second); len(got) != 2 || !strings.Contains(got[1].Text, "The owner approved you") {
		t.Fatalf("Bob was not told he was approved: %+v", got)
	}
	done := `(() => document.querySelectorAll("#pending li.pair").length === 0 &&
		[...document.querySelectorAll("#approved li.pair .pwho")].map((e) => e.textContent).join() === "Bob · Telegram id 6262")()`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](done, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the page did not follow the approval: %v", err)
	}
}
