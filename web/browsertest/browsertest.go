// Package browsertest starts headless Chromium for end-to-end tests of the
// web pages, driven with chromedp. Without Chromium the tests are skipped,
// except under CI=true, where a missing browser is a failure (scripts/test.sh
// installs it).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ExecPath finds Chromium: $CHROMIUM, else chromium or google-chrome on PATH.
func ExecPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser starts a headless browser for the test and returns a context for
// its first tab. Use NewContext for further isolated browser contexts.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path := ExecPath()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("Chromium is not installed (scripts/test.sh installs it)")
		}
		t.Skip("Chromium not installed; run scripts/test.sh to install it")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1100, 800),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser now, without a timeout (a timeout here would stop it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// NewContext opens a tab in a fresh browser context (its own cookies), like
// a second person or device.
func NewContext(t testing.TB, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("new browser context: %v", err)
	}
	return ctx
}

// Timeout derives a bounded context for a group of actions.
func Timeout(t testing.TB, ctx context.Context, d time.Duration) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return c
}
