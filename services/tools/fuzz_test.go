package tools

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzWorkspacePath checks the sandbox with arbitrary paths: Resolve either
// refuses a path or returns one inside the root (also after resolving the
// symlinks of its existing part), and writing then reading it through the
// tools only ever touches files under the root — the canary, the fake
// etc/passwd and the sibling timeline's workspace stay as they were.
func FuzzWorkspacePath(f *testing.F) {
	for _, p := range []string{
		"a.txt", "docs/new.txt", "docs_link/new.txt", "inside_link", ".", "./", "docs/",
		"", "..", "../x", "../../outside/canary.txt", "/etc/passwd", "/", "a/../../b", "a/../b",
		"a\x00b", "\x00", "etc/passwd", "passwd", "canary", "relative_out", "dangling", "loop/x",
		"outdir/canary.txt", "outdir/new", "sibling/private.txt", "sibling_file", "sibling/../x",
		"docs_link/../../outside/canary.txt", "../tg%3A123/private.txt", "tg%3A123/private.txt",
		"..\\x", "\\etc\\passwd", "....//x", ".../x", "%2e%2e/x", "~/x", "a/./b//c/", "\u2025/x",
		"C:\\x", "docs/inside.txt/x", strings.Repeat("a/", 100) + "b", strings.Repeat("x", 300),
		" ", "\n", ".switchboard-tmp-0000", "a/\xff\xfe",
	} {
		f.Add(p)
	}
	// One sandbox per worker (creating symlinks is slow on some file
	// systems), put back to its initial state after every input so that runs
	// stay independent and reproducible.
	reg, s := setupTools(f)
	root := s.global.Dir()
	initial := treeState(f, root)
	f.Fuzz(func(t *testing.T, p string) {
		defer restoreTree(t, root, initial)
		// Tool arguments arrive as JSON, which cannot carry invalid UTF-8:
		// check the path the tools will actually see.
		b, _ := json.Marshal(p)
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		rel, err := s.global.Resolve(p)
		if err == nil {
			assertInside(t, root, p, rel)
		}
		res := call(t, reg, "global", "write_file", map[string]any{"path": p, "content": "fuzz"})
		if !res.IsError {
			if err != nil {
				t.Fatalf("Resolve(%q) refused (%v) but write_file succeeded", p, err)
			}
			r := call(t, reg, "global", "read_file", map[string]any{"path": p})
			got := decodeResult[readFileResult](t, r)
			if got.Content != "fuzz" {
				t.Fatalf("read back %q after writing %q", got.Content, p)
			}
			rel, err := s.global.Resolve(p)
			if err != nil {
				t.Fatalf("Resolve(%q) after a successful write: %v", p, err)
			}
			assertInside(t, root, p, rel)
			if b, err := os.ReadFile(filepath.Join(root, rel)); err != nil || string(b) != "fuzz" {
				t.Fatalf("written file %q is not at %q under the root: %q, %v", p, rel, b, err)
			}
		}
		call(t, reg, "global", "list_files", map[string]any{"path": p, "recursive": true})
		call(t, reg, "global", "search", map[string]any{"path": p, "query": "canary"})
		s.assertOutsideUntouched(t)
	})
}

// assertInside checks that rel is local and that the existing part of
// root/rel, symlinks resolved, lies inside root.
func assertInside(t *testing.T, root, p, rel string) {
	t.Helper()
	if rel != "." && !filepath.IsLocal(rel) {
		t.Fatalf("Resolve(%q) = %q, not local", p, rel)
	}
	existing := filepath.Join(root, rel)
	for {
		if _, err := os.Lstat(existing); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		existing = filepath.Dir(existing)
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		if strings.HasPrefix(existing, root) && !errors.Is(err, fs.ErrNotExist) {
			return // e.g. ENOTDIR below a file: nothing there to escape to
		}
		t.Fatalf("Resolve(%q) = %q whose existing part %q does not resolve: %v", p, rel, existing, err)
	}
	if r, err := filepath.Rel(root, real); err != nil || !(r == "." || filepath.IsLocal(r)) {
		t.Fatalf("Resolve(%q) = %q which lies at %q, outside %q", p, rel, real, root)
	}
}

// entryState is what treeState records of one file: its type and its
// content or symlink target.
type entryState struct {
	mode fs.FileMode
	data string
}

func treeState(t testing.TB, root string) map[string]entryState {
	t.Helper()
	state := map[string]entryState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		e := entryState{mode: d.Type()}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			e.data, err = os.Readlink(p)
		case d.Type().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			e.data = string(b)
		}
		state[p] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// restoreTree removes what was added under root since initial was taken and
// puts back what changed.
func restoreTree(t testing.TB, root string, initial map[string]entryState) {
	t.Helper()
	now := treeState(t, root)
	for p := range now {
		if _, ok := initial[p]; !ok {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p, want := range initial {
		if got, ok := now[p]; ok && got == want {
			continue
		}
		var err error
		switch {
		case want.mode&fs.ModeSymlink != 0:
			_ = os.RemoveAll(p)
			err = os.Symlink(want.data, p)
		case want.mode.IsRegular():
			_ = os.RemoveAll(p)
			err = os.WriteFile(p, []byte(want.data), 0o600)
		case want.mode.IsDir():
			err = os.MkdirAll(p, 0o700)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
