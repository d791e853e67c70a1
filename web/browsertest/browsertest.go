// Package browsertest starts headless Chromium for end-to-end tests of the
// web pages, driven with chromedp. Without Chromium the tests are skipped,
// except under CI=true, where a missing browser is a failure (scripts/test.sh
// installs it).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"sync"
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

// execPath is ExecPath, skipping the test (failing it under CI=true) when
// there is no Chromium.
func execPath(t testing.TB) string {
	t.Helper()
	path := ExecPath()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("Chromium is not installed (scripts/test.sh installs it)")
		}
		t.Skip("Chromium not installed; run scripts/test.sh to install it")
	}
	return path
}

// start starts a headless browser with its profile in dir and returns a
// context for its first tab and what stops it.
func start(path, dir string) (context.Context, func(), error) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(dir),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1100, 800),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	stop := func() { cancel(); cancelAlloc() }
	// Start the browser now, without a timeout (a timeout here would stop it).
	if err := chromedp.Do(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return ctx, stop, nil
}

// Browser starts a headless browser for the test and returns a context for
// its first tab. Use NewContext for further isolated browser contexts.
func Browser(t testing.TB) context.Context {
	t.Helper()
	ctx, stop, err := start(execPath(t), t.TempDir())
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(stop)
	return ctx
}

// shared is the browser the tests of one test binary share (Shared).
var shared struct {
	mu   sync.Mutex
	ctx  context.Context
	stop func()
	dir  string
}

// Shared returns the first tab of one headless browser that the test
// binary's tests share, started by the first test to ask (again if its
// context has ended). Each test opens its own tab in a fresh browser
// context with NewContext, so no cookie, storage or page outlives the
// test; starting Chromium once instead of once per test is what it saves.
// The package's TestMain calls Close after the tests run.
func Shared(t testing.TB) context.Context {
	t.Helper()
	path := execPath(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ctx != nil && shared.ctx.Err() == nil {
		return shared.ctx
	}
	closeShared()
	dir, err := os.MkdirTemp("", "browsertest-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop, err := start(path, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("start Chromium: %v", err)
	}
	shared.ctx, shared.stop, shared.dir = ctx, stop, dir
	return ctx
}

// Close stops the shared browser (Shared), if one was started, and removes
// its profile.
func Close() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	closeShared()
}

func closeShared() {
	if shared.stop != nil {
		shared.stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.ctx, shared.stop, shared.dir = nil, nil, ""
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
