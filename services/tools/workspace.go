package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard/switchboard/services"
)

// Workspace limits.
const (
	// MaxReadBytes caps what read_file returns in one call.
	MaxReadBytes = 256 << 10
	// MaxWriteBytes is the default cap of the content of one write_file
	// call (AGENT_MAX_WRITE_BYTES).
	MaxWriteBytes = 1 << 20
	// MaxRunWriteBytes is the default cap of what one run writes in all
	// (AGENT_MAX_RUN_WRITE_BYTES).
	MaxRunWriteBytes = 8 << 20
	// MaxWorkspaceBytes is the default cap of what one workspace holds
	// (WORKSPACE_MAX_BYTES).
	MaxWorkspaceBytes = 256 << 20
	// MaxSearchFileBytes: search skips larger files.
	MaxSearchFileBytes = 1 << 20
	// maxScopeDirName keeps the directory name under common NAME_MAX (255).
	maxScopeDirName = 255
	// MaxPathBytes and MaxPathDepth bound what an agent may name, keeping
	// paths well under PATH_MAX and trees walkable (os.Root itself would
	// happily build a directory chain thousands of levels deep).
	MaxPathBytes = 1024
	MaxPathDepth = 32
)

// Workspace is the sandboxed directory of one timeline: <base>/<dir name of
// the timeline scope>. Every path an agent passes is relative to it and is
// checked by Resolve; the file operations then go through an os.Root, which
// refuses escapes through symlinks even if the tree changes between the check
// and the operation. Timelines never see each other's workspaces.
//
// A Workspace also remembers, per context scope and file, the mtime and size
// seen at the last read, so that read_file can say the file changed since.
// It is safe for concurrent use.
type Workspace struct {
	timelineScope string
	dir           string // absolute, symlinks resolved
	root          *os.Root
	limits        WriteLimits

	mu       sync.Mutex
	lastSeen map[seenKey]fileStamp

	// written is what each run wrote here; used is what the workspace
	// holds (-1: not measured yet). Both change under quota.
	quota   sync.Mutex
	written map[int64]int64
	used    int64
}

// Error codes of refused writes.
const (
	// CodeWriteLimit: a write would pass the run's or the workspace's
	// bound (WriteLimits); the message names the bound and the numbers. A
	// write over the per-call bound is TOOL_TOO_LARGE, as before.
	CodeWriteLimit = "TOOL_WRITE_LIMIT"
	// CodeRulesFile: the path is (or leads to) a rules file, which only
	// the owner writes; the model should call propose_rule.
	CodeRulesFile = "TOOL_RULES_FILE"
)

// WriteLimits bound what the agent writes into a workspace. Zero fields
// take the defaults (MaxWriteBytes, MaxRunWriteBytes, MaxWorkspaceBytes).
type WriteLimits struct {
	// PerCall bounds the content of one write (AGENT_MAX_WRITE_BYTES).
	PerCall int64
	// PerRun bounds what one run writes in all, appends and replaces
	// counted by the bytes written (AGENT_MAX_RUN_WRITE_BYTES).
	PerRun int64
	// Workspace bounds the bytes of all files of one timeline's workspace
	// (WORKSPACE_MAX_BYTES).
	Workspace int64
	// RulesWritable lets the write tools write the rules files
	// (AGENT_RULES_WRITABLE); off, they refuse with TOOL_RULES_FILE.
	RulesWritable bool
}

func (l WriteLimits) withDefaults() WriteLimits {
	if l.PerCall <= 0 {
		l.PerCall = MaxWriteBytes
	}
	if l.PerRun <= 0 {
		l.PerRun = MaxRunWriteBytes
	}
	if l.Workspace <= 0 {
		l.Workspace = MaxWorkspaceBytes
	}
	return l
}

// maxRunsTracked bounds the per-run byte counts a workspace keeps; the
// oldest runs (lowest ids) are forgotten first.
const maxRunsTracked = 1024

type seenKey struct{ contextScope, path string }

type fileStamp struct {
	mtime time.Time
	size  int64
}

func (s fileStamp) equal(o fileStamp) bool { return s.mtime.Equal(o.mtime) && s.size == o.size }

func stampOf(info fs.FileInfo) fileStamp {
	return fileStamp{mtime: info.ModTime(), size: info.Size()}
}

// WorkspaceDirName maps a timeline scope to the name of its workspace
// directory: bytes outside [A-Za-z0-9_.-] and a leading "." are
// percent-encoded ("tg:123" → "tg%3A123"), so the mapping is injective and
// reversible and never yields "", ".", ".." or a path separator. (On a
// case-insensitive file system "A" and "a" would still collide; timeline
// scopes are lower-case by convention.) It returns EINVALID for an empty
// scope or one whose name would exceed 255 bytes.
func WorkspaceDirName(timelineScope string) (string, error) {
	if timelineScope == "" {
		return "", services.Errorf(services.EINVALID, "timeline scope is empty")
	}
	var b strings.Builder
	for i := 0; i < len(timelineScope); i++ {
		c := timelineScope[i]
		safe := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '_' || c == '-' || c == '.' && i > 0
		if safe {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > maxScopeDirName {
		return "", services.Errorf(services.EINVALID, "timeline scope is too long for a workspace directory (%d bytes)", len(timelineScope))
	}
	return b.String(), nil
}

// OpenWorkspace opens (creating with mode 0700 when missing) the workspace of
// timelineScope under baseDir, with the default WriteLimits. Close it when
// done.
func OpenWorkspace(baseDir, timelineScope string) (*Workspace, error) {
	return openWorkspace(baseDir, timelineScope, WriteLimits{})
}

func openWorkspace(baseDir, timelineScope string, limits WriteLimits) (*Workspace, error) {
	name, err := WorkspaceDirName(timelineScope)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(baseDir, 0o700); err != nil {
		return nil, fmt.Errorf("tools: create workspace base %s: %w", baseDir, err)
	}
	base, err := filepath.Abs(baseDir)
	if err == nil {
		base, err = filepath.EvalSymlinks(base)
	}
	if err != nil {
		return nil, fmt.Errorf("tools: resolve workspace base %s: %w", baseDir, err)
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("tools: create workspace %s: %w", dir, err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: stat workspace %s: %w", dir, err)
	}
	if !info.IsDir() {
		// A symlink here would let one timeline's workspace alias another's.
		return nil, fmt.Errorf("tools: workspace %s is not a plain directory (%s)", dir, info.Mode().Type())
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: open workspace %s: %w", dir, err)
	}
	return &Workspace{timelineScope: timelineScope, dir: dir, root: root, limits: limits.withDefaults(),
		lastSeen: map[seenKey]fileStamp{}, written: map[int64]int64{}, used: -1}, nil
}

// TimelineScope returns the timeline this workspace belongs to.
func (w *Workspace) TimelineScope() string { return w.timelineScope }

// Limits returns the bounds this workspace applies.
func (w *Workspace) Limits() WriteLimits { return w.limits }

// ChangedOutside tells the workspace that its files changed without its
// write tools (a sandboxed program wrote there): the next write measures
// the workspace again before counting against its bound.
func (w *Workspace) ChangedOutside() {
	w.quota.Lock()
	defer w.quota.Unlock()
	w.used = -1
}

// Dir returns the absolute, symlink-free directory of the workspace. It is
// for operators and tests; never show it to the model.
func (w *Workspace) Dir() string { return w.dir }

// Close releases the workspace's directory handle.
func (w *Workspace) Close() error { return w.root.Close() }

func refusePath(format string, args ...any) error {
	return services.CodedErrorf(services.EINVALID, CodePathRefused, format, args...)
}

// Resolve checks a path given by the model and returns it relative to the
// workspace root, cleaned and with every symlink along its existing part
// resolved ("." is the root itself). It refuses (EINVALID, TOOL_PATH_REFUSED)
// empty and absolute paths, NUL bytes, any ".." segment, and paths that lead
// outside the root through a symlink, including a dangling one. The part of
// the path that does not exist yet is kept as given, so the result is also
// what a write should create.
func (w *Workspace) Resolve(name string) (string, error) {
	switch {
	case name == "":
		return "", refusePath("path is empty")
	case strings.IndexByte(name, 0) >= 0:
		return "", refusePath("path %q contains a NUL byte", name)
	case filepath.IsAbs(name) || strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`):
		return "", refusePath("path %q is absolute; use a path relative to the workspace", name)
	case len(name) > MaxPathBytes:
		return "", refusePath("path is too long (%d bytes; at most %d)", len(name), MaxPathBytes)
	}
	segs := strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == filepath.Separator })
	for _, seg := range segs {
		if seg == ".." {
			return "", refusePath("path %q escapes the workspace (\"..\" is not allowed)", name)
		}
	}
	if len(segs) > MaxPathDepth {
		return "", refusePath("path %q is too deep (%d levels; at most %d)", name, len(segs), MaxPathDepth)
	}
	clean := filepath.Clean(name)
	if clean == "." {
		return ".", nil
	}
	if !filepath.IsLocal(clean) {
		return "", refusePath("path %q escapes the workspace", name)
	}
	parts := strings.Split(clean, string(filepath.Separator))
	cur := w.dir
	for i, part := range parts {
		next := filepath.Join(cur, part)
		info, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			cur = filepath.Join(append([]string{cur}, parts[i:]...)...)
			break
		}
		shown := filepath.Join(parts[:i+1]...)
		if errors.Is(err, syscall.ENOTDIR) {
			return "", services.Errorf(services.EINVALID, "path %q: %q is not a directory", name, filepath.Dir(shown))
		}
		if err != nil {
			return "", fsError("resolve", name, err)
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		target, err := filepath.EvalSymlinks(next)
		if err != nil {
			return "", refusePath("path %q goes through symlink %q whose target does not exist or cannot be resolved", name, shown)
		}
		if !w.contains(target) {
			return "", refusePath("path %q escapes the workspace through symlink %q", name, shown)
		}
		cur = target
	}
	rel, err := filepath.Rel(w.dir, cur)
	if err != nil || !(rel == "." || filepath.IsLocal(rel)) {
		return "", refusePath("path %q escapes the workspace", name)
	}
	return rel, nil
}

// contains reports whether the absolute, symlink-free path p is the root or
// lies beneath it.
func (w *Workspace) contains(p string) bool {
	return p == w.dir || strings.HasPrefix(p, w.dir+string(filepath.Separator))
}

// Open resolves name and opens it for reading through the root. It returns
// the file and its info, ENOTFOUND when it does not exist and EINVALID when
// it is a directory or the path is refused.
func (w *Workspace) Open(name string) (*os.File, fs.FileInfo, error) {
	rel, err := w.Resolve(name)
	if err != nil {
		return nil, nil, err
	}
	return w.open(name, rel)
}

// open opens rel, a path returned by Resolve; name is the model's path, for
// messages.
func (w *Workspace) open(name, rel string) (*os.File, fs.FileInfo, error) {
	f, err := w.root.Open(rel)
	if err != nil {
		return nil, nil, fsError("open", name, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fsError("stat", name, err)
	}
	if info.IsDir() {
		f.Close()
		return nil, nil, services.Errorf(services.EINVALID, "%q is a directory; use list_files", name)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, services.Errorf(services.EINVALID, "%q is not a regular file", name)
	}
	return f, info, nil
}

// WriteFile writes data to name, creating parent directories (0700) inside
// the workspace. Without appendData the file is replaced atomically: the data
// goes to a temporary file in the same directory which is then renamed over
// the target, so readers see the old or the new content, never a mix. With
// appendData the data is appended to an existing file (O_APPEND). It returns
// the file's new info and whether the file was created; ETOOLARGE
// when data exceeds the per-call limit, or (TOOL_WRITE_LIMIT) the workspace
// would exceed its size limit; EINVALID for a refused path, a rules file
// (TOOL_RULES_FILE) or a directory. Writes through WriteFile count against
// no run; the write_file tool counts each run's bytes.
func (w *Workspace) WriteFile(name string, data []byte, appendData bool) (info fs.FileInfo, created bool, err error) {
	rel, err := w.resolveWrite(name)
	if err != nil {
		return nil, false, err
	}
	before, info, err := w.writeFile(name, rel, data, appendData, 0)
	return info, before == nil, err
}

// SaveUpload writes a file the owner sent (an attachment) to name,
// replacing it atomically: like WriteFile, but the bound of one write
// (AGENT_MAX_WRITE_BYTES, which bounds the model's writes) does not apply;
// the workspace's bound does (ETOOLARGE, TOOL_WRITE_LIMIT).
func (w *Workspace) SaveUpload(name string, data []byte) (fs.FileInfo, error) {
	rel, err := w.resolveWrite(name)
	if err != nil {
		return nil, err
	}
	_, info, err := w.writeFile(name, rel, data, false, -1)
	return info, err
}

// resolveWrite is Resolve for a write: it also refuses the rules files
// (unless RulesWritable), by the model's spelling first ("./RULES.md",
// "sub/../rules.md") and then by the resolved path, which catches a
// symlink or a symlinked directory that leads to one.
func (w *Workspace) resolveWrite(name string) (string, error) {
	if !w.limits.RulesWritable && services.IsRulesFile(name) {
		return "", refuseRules(name, "")
	}
	rel, err := w.Resolve(name)
	if err != nil {
		return "", err
	}
	if !w.limits.RulesWritable && services.IsRulesFile(filepath.ToSlash(rel)) {
		return "", refuseRules(name, rel)
	}
	if isServiceFile(rel) {
		return "", refuseServiceFile(name)
	}
	return rel, nil
}

func refuseRules(name, rel string) error {
	what := fmt.Sprintf("%q is", name)
	if rel != "" {
		what = fmt.Sprintf("%q leads to %q, which is", name, filepath.ToSlash(rel))
	}
	return services.CodedErrorf(services.EINVALID, CodeRulesFile,
		"%s the owner's standing rules file (RULES.md or CODE_LAW.md); you may not write it. "+
			"To change the rules, call propose_rule with the rule's text: the owner approves or rejects it.", what)
}

// writeFile writes to rel, a path returned by resolveWrite; name is the
// model's path, for messages; runID is the run the bytes count against (0:
// none; -1: an upload, which the bound of one write does not apply to). before is the file's info ahead of the write, nil when the write
// created it.
func (w *Workspace) writeFile(name, rel string, data []byte, appendData bool, runID int64) (before, after fs.FileInfo, err error) {
	if n := int64(len(data)); n > w.limits.PerCall && runID >= 0 {
		return nil, nil, services.Errorf(services.ETOOLARGE,
			"content is %d bytes; one write accepts at most %s (AGENT_MAX_WRITE_BYTES); split it and append the rest",
			n, humanBytes(w.limits.PerCall))
	}
	if rel == "." {
		return nil, nil, services.Errorf(services.EINVALID, "path %q is the workspace itself; name a file", name)
	}
	before, err = w.root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		before = nil
	case errors.Is(err, syscall.ENOTDIR):
		return nil, nil, services.Errorf(services.EINVALID, "path %q: a parent is not a directory", name)
	case err != nil:
		return nil, nil, fsError("stat", name, err)
	case before.IsDir():
		return nil, nil, services.Errorf(services.EINVALID, "%q is a directory", name)
	case !before.Mode().IsRegular():
		return nil, nil, services.Errorf(services.EINVALID, "%q is not a regular file", name)
	}
	var beforeSize int64
	if before != nil {
		beforeSize = before.Size()
	}
	n, growth := int64(len(data)), int64(len(data))
	if !appendData || before == nil {
		growth -= beforeSize
	}
	if err := w.reserve(name, runID, n, growth); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			w.release(runID, n, growth)
		}
	}()
	parent := filepath.Dir(rel)
	if parent != "." {
		if err := w.root.MkdirAll(parent, 0o700); err != nil {
			return nil, nil, fsError("create the directory of", name, err)
		}
	}
	if appendData && before != nil {
		err = w.appendFile(rel, data)
	} else {
		var perm fs.FileMode = 0o600
		if before != nil {
			perm = before.Mode().Perm()
		}
		err = w.replaceFile(rel, data, perm)
	}
	if err != nil {
		return nil, nil, fsError("write", name, err)
	}
	after, err = w.root.Stat(rel)
	if err != nil {
		return nil, nil, fsError("stat", name, err)
	}
	w.settle(growth, after.Size()-beforeSize)
	return before, after, nil
}

// reserve counts a write of n bytes, growing the workspace by growth (less
// than n, or negative, for a replace), against the run's and the
// workspace's limits, or refuses it (ETOOLARGE, TOOL_WRITE_LIMIT) naming the
// limit and the numbers. Counting before the write keeps the limits exact
// when one response's calls run in parallel.
func (w *Workspace) reserve(name string, runID, n, growth int64) error {
	w.quota.Lock()
	defer w.quota.Unlock()
	if runID > 0 {
		if done := w.written[runID]; done+n > w.limits.PerRun {
			return services.CodedErrorf(services.ETOOLARGE, CodeWriteLimit,
				"write to %q refused: this run has written %d bytes and this write adds %d, past the limit of %s per run "+
					"(AGENT_MAX_RUN_WRITE_BYTES). Nothing was written. Stop writing in this run and tell the owner what is left.",
				name, done, n, humanBytes(w.limits.PerRun))
		}
	}
	if growth > 0 && (w.used < 0 || w.used+growth > w.limits.Workspace) {
		// First write, or near the limit: measure (files may have changed
		// behind the workspace's back).
		used, err := w.measure()
		if err != nil {
			return fsError("measure the workspace for", name, err)
		}
		w.used = used
		if used+growth > w.limits.Workspace {
			return services.CodedErrorf(services.ETOOLARGE, CodeWriteLimit,
				"write to %q refused: the workspace holds %d bytes and this write adds %d, past its limit of %s "+
					"(WORKSPACE_MAX_BYTES). Nothing was written. Make room by replacing large files with shorter content, or ask the owner.",
				name, used, growth, humanBytes(w.limits.Workspace))
		}
	}
	if runID > 0 {
		w.written[runID] += n
		for len(w.written) > maxRunsTracked {
			oldest := runID
			for id := range w.written {
				oldest = min(oldest, id)
			}
			delete(w.written, oldest)
		}
	}
	if w.used >= 0 {
		w.used += growth
	}
	return nil
}

// release undoes reserve for a write that failed.
func (w *Workspace) release(runID, n, growth int64) {
	w.quota.Lock()
	defer w.quota.Unlock()
	if runID > 0 {
		if _, ok := w.written[runID]; ok {
			w.written[runID] -= n
		}
	}
	if w.used >= 0 {
		w.used -= growth
	}
}

// settle corrects the workspace's size by what a write really changed.
func (w *Workspace) settle(reserved, actual int64) {
	w.quota.Lock()
	defer w.quota.Unlock()
	if w.used >= 0 {
		w.used += actual - reserved
	}
}

// measure sums the sizes of the regular files under the root.
func (w *Workspace) measure() (int64, error) {
	var total int64
	err := fs.WalkDir(w.root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable part: count what we can
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total, err
}

// humanBytes is "n bytes", followed by n in the largest binary unit that
// divides it: "8388608 bytes (8 MiB)".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d bytes (%d GiB)", n, n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d bytes (%d KiB)", n, n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (w *Workspace) appendFile(rel string, data []byte) error {
	f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (w *Workspace) replaceFile(rel string, data []byte, perm fs.FileMode) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never fails
	// A short fixed name: "<base>.tmp" could exceed NAME_MAX for long names.
	tmp := filepath.Join(filepath.Dir(rel), ".switchboard-tmp-"+hex.EncodeToString(rnd[:]))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = w.root.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil { // umask may have narrowed it
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := w.root.Rename(tmp, rel); err != nil {
		return err
	}
	ok = true
	return nil
}

// noteRead records what contextScope saw of rel and reports whether the file
// changed since that scope last read or wrote it.
func (w *Workspace) noteRead(contextScope, rel string, info fs.FileInfo) (changed bool) {
	k := seenKey{contextScope, rel}
	now := stampOf(info)
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, ok := w.lastSeen[k]
	w.lastSeen[k] = now
	return ok && !prev.equal(now)
}

// noteWrite records that contextScope wrote rel. After a replace the writer
// knows the whole content, so its next read is not "changed". After an
// append it only knows the file if it had seen the version it appended to;
// otherwise the earlier stamp stays and the next read reports the change.
func (w *Workspace) noteWrite(contextScope, rel string, before, after fs.FileInfo, appended bool) {
	k := seenKey{contextScope, rel}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.lastSeen[k]; appended && before != nil && ok && !prev.equal(stampOf(before)) {
		return
	}
	w.lastSeen[k] = stampOf(after)
}

// fsError turns a file-system error into a domain error that names the
// model's path, never the host path.
func fsError(op, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return services.Errorf(services.ENOTFOUND, "%q does not exist", name)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg := pe.Err.Error()
		if strings.Contains(msg, "escapes") {
			return refusePath("path %q escapes the workspace", name)
		}
		return services.Errorf(services.EINVALID, "cannot %s %q: %s", op, name, msg)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return services.Errorf(services.EINVALID, "cannot %s %q: %s", op, name, le.Err.Error())
	}
	return &services.Error{Kind: services.EINTERNAL, Message: fmt.Sprintf("%s %q", op, name), Err: err}
}

// Workspaces opens each timeline's Workspace once and keeps it, so that the
// last-read bookkeeping survives from one tool call to the next. Its For
// method is a WorkspaceFor. It is safe for concurrent use.
type Workspaces struct {
	baseDir string
	limits  WriteLimits

	mu   sync.Mutex
	open map[string]*Workspace
}

// NewWorkspaces returns the set of workspaces under baseDir, with the
// default WriteLimits.
func NewWorkspaces(baseDir string) *Workspaces {
	return NewWorkspacesWith(baseDir, WriteLimits{})
}

// NewWorkspacesWith returns the set of workspaces under baseDir; every
// workspace it opens applies limits.
func NewWorkspacesWith(baseDir string, limits WriteLimits) *Workspaces {
	return &Workspaces{baseDir: baseDir, limits: limits.withDefaults(), open: map[string]*Workspace{}}
}

// For returns the workspace of timelineScope, opening it on first use.
func (s *Workspaces) For(timelineScope string) (*Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.open[timelineScope]; ok {
		return w, nil
	}
	w, err := openWorkspace(s.baseDir, timelineScope, s.limits)
	if err != nil {
		return nil, err
	}
	s.open[timelineScope] = w
	return w, nil
}

// Close closes every open workspace.
func (s *Workspaces) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for k, w := range s.open {
		errs = append(errs, w.Close())
		delete(s.open, k)
	}
	return errors.Join(errs...)
}
