package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailingPinSourcesAreSkipped: through the real server, a pinned file
// that cannot be read (it became a directory) and a manifest file that
// cannot be read are each skipped with CONTEXT_SOURCE_UNAVAILABLE naming
// them, and the preview is still built with the rest (the other pin, or no
// pins).
func TestFailingPinSourcesAreSkipped(t *testing.T) {
	t.Parallel()
	url, _, dir := ctxInstance(t)
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("notes.md", "# Goals\n\nShip the pinned-section feature by Friday.\n")
	write("plan.md", "step one\nstep two\n")
	r, body := do(t, "PUT", url+"/api/context/manifest", testToken, `{"version":0,"pins":[{"path":"plan.md"},{"path":"notes.md","block":"Goals"}]}`)
	if r.StatusCode != 200 {
		t.Fatalf("PUT manifest: %d %s", r.StatusCode, body)
	}
	warning := func(p previewJSON, code string) string {
		for _, w := range p.Warnings {
			if w.Code == code {
				return w.Message
			}
		}
		return ""
	}

	// plan.md is now a directory: its pin is skipped, named; notes.md's is in.
	if err := os.Remove(filepath.Join(dir, "plan.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "plan.md"), 0o700); err != nil {
		t.Fatal(err)
	}
	pv := getPreview(t, url)
	msg := warning(pv, "CONTEXT_SOURCE_UNAVAILABLE")
	retrieved, _ := pv.layer("retrieved")
	if !strings.Contains(msg, "pinned file plan.md could not be read, pin plan.md skipped") || !strings.Contains(msg, "directory") ||
		!strings.Contains(retrieved, "Ship the pinned-section feature by Friday.") || strings.Contains(retrieved, "step one") {
		t.Fatalf("a pinned file failing: warning %q, retrieved %q", msg, retrieved)
	}

	// context.json itself cannot be read: every pin skipped, named; the
	// prompt is built.
	if err := os.Rename(filepath.Join(dir, "context.json"), filepath.Join(dir, "context.json.bak")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "context.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	pv = getPreview(t, url)
	msg = warning(pv, "CONTEXT_SOURCE_UNAVAILABLE")
	retrieved, _ = pv.layer("retrieved")
	if !strings.Contains(msg, "the manifest file context.json could not be read, its pins skipped") || retrieved != "" ||
		warning(pv, "CONTEXT_MANIFEST_INVALID") != "" || len(pv.Request.Tools) == 0 {
		t.Fatalf("the manifest file failing: warning %q, retrieved %q, warnings %+v", msg, retrieved, pv.Warnings)
	}
}
