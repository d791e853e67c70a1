// Package sandbox runs programs for the agent's exec tool inside bubblewrap
// (bwrap): new user, PID, IPC, UTS, network and mount namespaces, the
// conversation's workspace the only writable host path, a minimal /etc of
// the service's own, a private /tmp, no inherited environment, and limits
// on wall time, CPU time, memory, processes, output and file size. New
// probes once whether the sandbox works; when it does not, the tool is not
// offered and Status says why. Nothing here ever runs a program outside
// the sandbox.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultConcurrency    = 2
	DefaultMemoryBytes    = 1 << 30
	DefaultMaxProcs       = 64
	DefaultMaxOutputBytes = 64 << 10
	DefaultMaxFileBytes   = 256 << 20
	DefaultTmpBytes       = 64 << 20
	// floodFactor: a stream that passes this many times the kept output
	// floods, and the command is killed.
	floodFactor = 16
)

// WorkDir is where the workspace is mounted inside the sandbox.
const WorkDir = "/workspace"

// sandboxPath is the PATH programs get.
const sandboxPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// Options are the sandbox's settings (the EXEC_* variables).
type Options struct {
	// Bwrap is the bwrap binary; "" looks it up in PATH.
	Bwrap string
	// Timeout is the wall time of one run (EXEC_TIMEOUT); the whole
	// process tree is killed when it passes.
	Timeout time.Duration
	// CPUTime bounds the CPU time of each process (RLIMIT_CPU); 0: Timeout.
	CPUTime time.Duration
	// MemoryBytes bounds the memory: the cgroup's when one is available,
	// and each process's address space (RLIMIT_AS) always
	// (EXEC_MEMORY_BYTES).
	MemoryBytes int64
	// MaxProcs bounds the processes and threads (the cgroup's pids.max,
	// else RLIMIT_NPROC) (EXEC_MAX_PROCS).
	MaxProcs int
	// MaxOutputBytes is what is kept of stdout and of stderr, each
	// (EXEC_MAX_OUTPUT_BYTES); a stream past 16 times this is killed.
	MaxOutputBytes int64
	// MaxFileBytes bounds the size of one file written (RLIMIT_FSIZE);
	// the workspace's own bound is checked after the run.
	MaxFileBytes int64
	// TmpBytes is the size of the private /tmp (and /dev/shm).
	TmpBytes int64
	// Concurrency is how many sandboxes run at once (EXEC_CONCURRENCY).
	Concurrency int
	// Network must be false: a sandbox has no network (EXEC_NETWORK=1 is
	// refused by the configuration).
	Network bool
	// ReadOnly are the host directories bound read-only; nil: /usr, /bin,
	// /sbin, /lib, /lib32, /lib64 (those that exist; a symlink such as
	// /bin -> usr/bin is recreated as the same symlink).
	ReadOnly []string
	// CgroupRoot is where cgroup hierarchies are mounted; "": /sys/fs/cgroup.
	CgroupRoot string
	Logger     *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CPUTime <= 0 {
		o.CPUTime = o.Timeout
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.MaxProcs <= 0 {
		o.MaxProcs = DefaultMaxProcs
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.TmpBytes <= 0 {
		o.TmpBytes = DefaultTmpBytes
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ReadOnly == nil {
		o.ReadOnly = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"}
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Sandbox runs commands in bwrap. Its zero value is not usable; see New.
type Sandbox struct {
	opts    Options
	bwrap   string
	prlimit string
	etc     string // the service's minimal /etc
	cgroups *cgroups
	slots   chan struct{}

	mu     sync.Mutex
	reason string // why the sandbox does not work ("" when it does)
}

// New probes the sandbox: bwrap and prlimit are found, a process count can
// be bounded (a pids cgroup, or RLIMIT_NPROC when the service is not root:
// root is exempt from it), and bwrap starts a program in all its
// namespaces. It never fails: a sandbox that does not work says why
// (Reason) and refuses every run. Close it to remove its /etc.
func New(ctx context.Context, o Options) *Sandbox {
	o = o.withDefaults()
	s := &Sandbox{opts: o, slots: make(chan struct{}, o.Concurrency)}
	if err := s.probe(ctx); err != nil {
		s.reason = err.Error()
		o.Logger.Warn("exec sandbox unavailable: the exec tool is not offered", "reason", s.reason)
	}
	return s
}

func (s *Sandbox) probe(ctx context.Context) error {
	if s.opts.Network {
		return errors.New("EXEC_NETWORK=1 is not supported: a sandbox has no network")
	}
	var err error
	if s.bwrap, err = lookPath(s.opts.Bwrap, "bwrap"); err != nil {
		return fmt.Errorf("bwrap (Debian package bubblewrap) is not installed: %w", err)
	}
	if s.prlimit, err = lookPath("", "prlimit"); err != nil {
		return fmt.Errorf("prlimit (Debian package util-linux) is not installed: %w", err)
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		return fmt.Errorf("no /bin/sh: %w", err)
	}
	s.cgroups = findCgroups(s.opts.CgroupRoot, s.opts.Logger)
	if os.Geteuid() == 0 && !s.cgroups.has("pids") {
		return errors.New("the service runs as root and no pids cgroup is writable, so the number of processes cannot be bounded " +
			"(root is exempt from RLIMIT_NPROC); run the service as another user or give it a writable cgroup")
	}
	if s.etc, err = writeEtc(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "switchboard-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer os.RemoveAll(dir)
	out, err := s.run(ctx, runSpec{dir: dir, argv: []string{"/bin/sh", "-c", "echo ok"}, timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("bwrap cannot start a sandbox: %w", err)
	}
	if out.ExitCode != 0 || strings.TrimSpace(out.Stdout.String()) != "ok" {
		return fmt.Errorf("bwrap cannot start a sandbox (exit %d): %s", out.ExitCode, strings.TrimSpace(out.Stderr.String()))
	}
	return nil
}

func lookPath(given, name string) (string, error) {
	if given != "" {
		name = given
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// Reason is why the sandbox does not work, "" when it does.
func (s *Sandbox) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Available reports whether runs are possible.
func (s *Sandbox) Available() bool { return s.Reason() == "" }

// Options are the sandbox's settings, defaults filled in.
func (s *Sandbox) Options() Options { return s.opts }

// Limits describes the limits in one line, for /tools and the tool's
// description.
func (s *Sandbox) Limits() string {
	o := s.opts
	mem := "address space"
	if s.cgroups.has("memory") {
		mem = "in all"
	}
	procs := "RLIMIT_NPROC"
	if s.cgroups.has("pids") {
		procs = "cgroup"
	}
	return fmt.Sprintf("%s wall time, %s CPU time per process, %s memory (%s), %d processes (%s), %s kept of stdout and of stderr each, "+
		"%s per file written, %s /tmp, no network, %d at a time",
		o.Timeout, o.CPUTime, humanBytes(o.MemoryBytes), mem, o.MaxProcs, procs, humanBytes(o.MaxOutputBytes),
		humanBytes(o.MaxFileBytes), humanBytes(o.TmpBytes), o.Concurrency)
}

// Close removes the sandbox's /etc.
func (s *Sandbox) Close() error {
	if s.etc == "" {
		return nil
	}
	return os.RemoveAll(s.etc)
}

// writeEtc writes the minimal /etc every sandbox sees: a stub user and
// group, hosts, nsswitch, and the host's dynamic linker cache (the list of
// library paths; no secret).
func writeEtc() (string, error) {
	dir, err := os.MkdirTemp("", "switchboard-sandbox-etc-")
	if err != nil {
		return "", fmt.Errorf("sandbox /etc: %w", err)
	}
	files := map[string]string{
		"passwd":        "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n",
		"hosts":         "127.0.0.1 localhost\n::1 localhost\n",
		"hostname":      "sandbox\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
	}
	if b, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		files["ld.so.cache"] = string(b)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("sandbox /etc: %w", err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "alternatives"), 0o755); err != nil { // a mount point
		os.RemoveAll(dir)
		return "", fmt.Errorf("sandbox /etc: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("sandbox /etc: %w", err)
	}
	return dir, nil
}

// humanBytes is n in the largest binary unit that divides it.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
