package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func TestWorkspaceDirName(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"global":    "global",
		"tg:123":    "tg%3A123",
		"tg%3A123":  "tg%253A123",
		".":         "%2E",
		"..":        "%2E.",
		"a/b":       "a%2Fb",
		"a.b-c_D9":  "a.b-c_D9",
		"x\x00y":    "x%00y",
		"ü":         "%C3%BC",
		"../../etc": "%2E.%2F..%2Fetc",
	}
	seen := map[string]string{}
	for scope, want := range tests {
		got, err := WorkspaceDirName(scope)
		if err != nil || got != want {
			t.Errorf("WorkspaceDirName(%q) = %q, %v; want %q", scope, got, err, want)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q map to the same directory", scope, other)
		}
		seen[got] = scope
		if strings.ContainsAny(got, `/\`) || got == "." || got == ".." {
			t.Errorf("unsafe directory name %q", got)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 300)} {
		if _, err := WorkspaceDirName(bad); !services.IsKind(err, services.EINVALID) {
			t.Errorf("WorkspaceDirName(%d bytes): got %v, want EINVALID", len(bad), err)
		}
	}
}

func TestOpenWorkspaceCreatesPrivateDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	w, err := OpenWorkspace(filepath.Join(base, "ws"), "tg:123")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	info, err := os.Stat(filepath.Join(base, "ws", "tg%3A123"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("workspace mode = %o, want 700", perm)
	}
	if w.TimelineScope() != "tg:123" {
		t.Errorf("TimelineScope = %q", w.TimelineScope())
	}
}

func TestOpenWorkspaceRefusesSymlinkedWorkspaceDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(base, "evil")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWorkspace(base, "evil"); err == nil {
		t.Fatal("a symlinked workspace directory was accepted")
	}
}

// sandbox is a base directory with two timelines' workspaces, an outside
// directory holding a canary and a fake etc/passwd, and symlinks inside
// "global" that point out. Nothing here links to the real /etc, so a
// regression cannot clobber the host even when tests run as root.
type sandbox struct {
	base, outside, canary string
	wss                   *Workspaces
	global, other         *Workspace
	snapshot              map[string]string // outside and sibling files → content
}

const canaryText = "canary: must never change"

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	tmp := t.TempDir()
	s := &sandbox{base: filepath.Join(tmp, "workspaces"), outside: filepath.Join(tmp, "outside")}
	if err := os.MkdirAll(filepath.Join(s.outside, "etc"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.canary = filepath.Join(s.outside, "canary.txt")
	if err := os.WriteFile(s.canary, []byte(canaryText), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.outside, "etc", "passwd"), []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.wss = NewWorkspaces(s.base)
	t.Cleanup(func() { s.wss.Close() })
	var err error
	if s.global, err = s.wss.For("global"); err != nil {
		t.Fatal(err)
	}
	if s.other, err = s.wss.For("tg:123"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.other.Dir(), "private.txt"), []byte("tg secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := s.global.Dir()
	mustSymlink(t, filepath.Join(s.outside, "etc"), filepath.Join(g, "etc"))
	mustSymlink(t, filepath.Join(s.outside, "etc", "passwd"), filepath.Join(g, "passwd"))
	mustSymlink(t, s.other.Dir(), filepath.Join(g, "sibling"))
	mustSymlink(t, "../tg%3A123/private.txt", filepath.Join(g, "sibling_file"))
	mustSymlink(t, s.outside, filepath.Join(g, "outdir"))
	mustSymlink(t, s.canary, filepath.Join(g, "canary"))
	mustSymlink(t, filepath.Join(s.outside, "created-by-escape.txt"), filepath.Join(g, "dangling"))
	mustSymlink(t, "../../outside/canary.txt", filepath.Join(g, "relative_out"))
	mustSymlink(t, "loop", filepath.Join(g, "loop"))
	if err := os.MkdirAll(filepath.Join(g, "docs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g, "docs", "inside.txt"), []byte("inside"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "docs/inside.txt", filepath.Join(g, "inside_link"))
	mustSymlink(t, "docs", filepath.Join(g, "docs_link"))
	s.snapshot = s.outsideState(t)
	return s
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// outsideState maps every file outside the global workspace (the outside
// directory and the sibling workspace) to its content.
func (s *sandbox) outsideState(t testing.TB) map[string]string {
	t.Helper()
	state := map[string]string{}
	for _, dir := range []string{s.outside, s.other.Dir()} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				state[p] = "<dir>"
				return nil
			}
			b, err := os.ReadFile(p)
			state[p] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return state
}

// assertOutsideUntouched checks that nothing outside the global workspace
// was created, changed or removed.
func (s *sandbox) assertOutsideUntouched(t testing.TB) {
	t.Helper()
	if b, err := os.ReadFile(s.canary); err != nil || string(b) != canaryText {
		t.Fatalf("canary changed: %q, %v", b, err)
	}
	now := s.outsideState(t)
	for p, was := range s.snapshot {
		if now[p] != was {
			t.Fatalf("%s changed from %q to %q", p, was, now[p])
		}
	}
	for p := range now {
		if _, ok := s.snapshot[p]; !ok {
			t.Fatalf("%s was created outside the workspace", p)
		}
	}
}

func TestResolveRefuses(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	// Links to the real /etc only here, where nothing is written.
	mustSymlink(t, "/etc", filepath.Join(s.global.Dir(), "real_etc"))
	mustSymlink(t, "/etc/passwd", filepath.Join(s.global.Dir(), "real_passwd"))
	tests := map[string]string{ // path → part of the message
		"":                "empty",
		"../x":            `"../x" escapes the workspace`,
		"..":              "escapes",
		"a/../../b":       "escapes",
		"a/../b":          "escapes", // any ".." segment, even one that stays inside
		"/etc/passwd":     "absolute",
		"a\x00b":          "NUL",
		"etc/passwd":      `through symlink "etc"`,
		"passwd":          `through symlink "passwd"`,
		"relative_out":    "through symlink",
		"real_etc/passwd": `through symlink "real_etc"`,
		"real_passwd":     `through symlink "real_passwd"`,
		"sibling/private": `through symlink "sibling"`,
		"sibling_file":    "through symlink",
		"outdir/canary":   `through symlink "outdir"`,
		"canary":          "through symlink",
		"dangling":        "does not exist",
		"loop/x":          "cannot be resolved",
	}
	for p, want := range tests {
		rel, err := s.global.Resolve(p)
		if err == nil {
			t.Errorf("Resolve(%q) = %q, want refusal", p, rel)
			continue
		}
		if services.ErrorCode(err) != CodePathRefused || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%q) error = %v; want %s containing %q", p, err, CodePathRefused, want)
		}
	}
}

func TestResolveAllowsInside(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	tests := map[string]string{
		".":                   ".",
		"./a.txt":             "a.txt",
		"new/dir/file.txt":    "new/dir/file.txt",
		"docs//inside.txt":    "docs/inside.txt",
		"inside_link":         "docs/inside.txt",
		"docs_link/new.txt":   "docs/new.txt",
		"docs/":               "docs",
		"..foo":               "..foo",
		"...":                 "...",
		`back\slash`:          `back\slash`,
		"docs/inside.txt/..x": "docs/inside.txt/..x",
	}
	for p, want := range tests {
		rel, err := s.global.Resolve(p)
		if p == "docs/inside.txt/..x" {
			if err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("Resolve(%q) = %q, %v; want not-a-directory", p, rel, err)
			}
			continue
		}
		if err != nil || rel != filepath.FromSlash(want) {
			t.Errorf("Resolve(%q) = %q, %v; want %q", p, rel, err, want)
		}
	}
}

func TestWorkspaceWriteThroughSymlinksIsRefused(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	for _, p := range []string{"dangling", "canary", "outdir/new.txt", "sibling/private.txt", "etc/x", "etc/passwd", "sibling_file", "relative_out"} {
		if _, _, err := s.global.WriteFile(p, []byte("pwned"), false); err == nil {
			t.Errorf("WriteFile(%q) succeeded", p)
		}
		if _, _, err := s.global.WriteFile(p, []byte("pwned"), true); err == nil {
			t.Errorf("WriteFile(%q, append) succeeded", p)
		}
	}
	s.assertOutsideUntouched(t)
}

func TestRootRefusesEscapeEvenWithoutResolve(t *testing.T) {
	t.Parallel()
	// The os.Root is the second line of defence, for a tree that changes
	// between Resolve and the operation.
	s := newSandbox(t)
	for _, p := range []string{"dangling", "canary", "outdir/new.txt", "sibling/private.txt", "relative_out", "etc/passwd"} {
		if _, err := s.global.writeFileUnchecked(p); err == nil {
			t.Errorf("os.Root let %q through", p)
		}
	}
	s.assertOutsideUntouched(t)
}

// writeFileUnchecked skips Resolve, as a race would.
func (w *Workspace) writeFileUnchecked(rel string) (int, error) {
	f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.WriteString("pwned")
}

func TestWorkspaceWriteFile(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	info, created, err := s.global.WriteFile("a/b/c.txt", []byte("one"), false)
	if err != nil || !created || info.Size() != 3 {
		t.Fatalf("WriteFile = %v, %v, %v", info, created, err)
	}
	if _, created, err = s.global.WriteFile("a/b/c.txt", []byte("two"), true); err != nil || created {
		t.Fatalf("append: created=%v err=%v", created, err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.global.Dir(), "a/b/c.txt")); string(b) != "onetwo" {
		t.Fatalf("content = %q", b)
	}
	if _, _, err := s.global.WriteFile("inside_link", []byte("via link"), false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.global.Dir(), "docs/inside.txt")); string(b) != "via link" {
		t.Fatalf("write through inside symlink: %q", b)
	}
	if _, _, err := s.global.WriteFile("docs", []byte("x"), false); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("write over a directory: %v", err)
	}
	if _, _, err := s.global.WriteFile(".", []byte("x"), false); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("write to the root: %v", err)
	}
	big := make([]byte, MaxWriteBytes+1)
	if _, _, err := s.global.WriteFile("big.txt", big, false); !services.IsKind(err, services.ETOOLARGE) {
		t.Fatalf("oversized write: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.global.Dir(), "a/b"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	s.assertOutsideUntouched(t)
}
