package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limit names what stopped or hampered a run.
type Limit string

// The limits a run can reach.
const (
	LimitTimeout   Limit = "timeout"
	LimitOutput    Limit = "output"
	LimitCPU       Limit = "cpu"
	LimitFileSize  Limit = "file_size"
	LimitProcesses Limit = "processes"
	LimitMemory    Limit = "memory"
)

// Outcome is what one run did.
type Outcome struct {
	// ExitCode is the command's status; 128+n when signal n ended it.
	ExitCode int
	Duration time.Duration
	Stdout   *Capture
	Stderr   *Capture
	// Limits are the limits the run reached, each with a sentence.
	Limits []LimitHit
	// Killed: the sandbox was killed (wall time or output flood).
	Killed bool
}

// LimitHit is one limit a run reached.
type LimitHit struct {
	Limit Limit
	Note  string
}

// runSpec is one run: the program (argv inside the sandbox), the host
// directory mounted at WorkDir and the wall time.
type runSpec struct {
	dir     string
	argv    []string
	timeout time.Duration
}

// ErrBusy: every sandbox slot stayed taken for the whole wait.
var ErrBusy = errors.New("sandbox: every slot is busy")

// acquire takes a slot, waiting at most wait.
func (s *Sandbox) acquire(ctx context.Context, wait time.Duration) (func(), error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, ErrBusy
	}
}

// bwrapArgs is the sandbox: every namespace, the read-only system, the
// service's /etc, a private /tmp, the workspace read-write, no environment.
func (s *Sandbox) bwrapArgs(dir string) []string {
	o := s.opts
	a := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
		"--setenv", "PATH", sandboxPath, "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
	}
	for _, p := range o.ReadOnly {
		info, err := os.Lstat(p)
		switch {
		case err != nil:
			continue
		case info.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				a = append(a, "--symlink", target, p)
			}
		case info.IsDir():
			a = append(a, "--ro-bind", p, p)
		}
	}
	a = append(a, "--ro-bind", s.etc, "/etc")
	if info, err := os.Stat("/etc/alternatives"); err == nil && info.IsDir() {
		// Debian's alternatives are symlinks to programs (awk, editor).
		a = append(a, "--ro-bind", "/etc/alternatives", "/etc/alternatives")
	}
	size := strconv.FormatInt(o.TmpBytes, 10)
	a = append(a,
		"--proc", "/proc", "--dev", "/dev",
		"--size", size, "--tmpfs", "/dev/shm",
		"--size", size, "--tmpfs", "/tmp",
		"--bind", dir, WorkDir, "--chdir", WorkDir,
		"--remount-ro", "/",
	)
	return a
}

// prlimitArgs are the per-process limits: CPU time (soft, then SIGKILL a
// second later), address space, file size, processes (when no cgroup
// bounds them), no core dumps.
func (s *Sandbox) prlimitArgs() []string {
	o := s.opts
	cpu := int64(o.CPUTime.Round(time.Second) / time.Second)
	cpu = max(cpu, 1)
	a := []string{
		fmt.Sprintf("--cpu=%d:%d", cpu, cpu+1),
		fmt.Sprintf("--as=%d", o.MemoryBytes),
		fmt.Sprintf("--fsize=%d", o.MaxFileBytes),
		"--core=0",
	}
	if !s.cgroups.has("pids") {
		a = append(a, fmt.Sprintf("--nproc=%d", o.MaxProcs))
	}
	return a
}

// run starts bwrap and waits for it, within spec.timeout, the output caps
// and the limits. An error means the sandbox could not be started.
func (s *Sandbox) run(ctx context.Context, spec runSpec) (*Outcome, error) {
	group, err := s.cgroups.create(s.opts.MaxProcs, s.opts.MemoryBytes)
	if err != nil {
		return nil, err
	}
	defer group.remove()

	// The chain: sh puts itself in the cgroup and execs prlimit, which
	// sets the limits and execs bwrap. Nothing of the service's
	// environment goes along.
	argv := []string{"/bin/sh", "-c", `for f in $CGROUP_PROCS; do echo $$ > "$f" || exit 127; done; exec "$@"`, "sh", s.prlimit}
	argv = append(argv, s.prlimitArgs()...)
	argv = append(argv, "--", s.bwrap)
	argv = append(argv, s.bwrapArgs(spec.dir)...)
	argv = append(argv, "--")
	argv = append(argv, spec.argv...)

	out := &Outcome{Stdout: newCapture(s.opts.MaxOutputBytes), Stderr: newCapture(s.opts.MaxOutputBytes)}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "CGROUP_PROCS=" + group.procsFiles()}
	cmd.Dir = "/"
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second

	var killOnce sync.Once
	kill := func(hit LimitHit) {
		killOnce.Do(func() {
			out.Killed = true
			out.Limits = append(out.Limits, hit)
			if cmd.Process != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			group.kill()
		})
	}
	flood := s.opts.MaxOutputBytes * floodFactor
	cmd.Stdout = out.Stdout.withFlood(flood, func() {
		kill(LimitHit{LimitOutput, fmt.Sprintf("stdout passed %s (EXEC_MAX_OUTPUT_BYTES × %d): the command was killed; write large output to a file instead", humanBytes(flood), floodFactor)})
	})
	cmd.Stderr = out.Stderr.withFlood(flood, func() {
		kill(LimitHit{LimitOutput, fmt.Sprintf("stderr passed %s (EXEC_MAX_OUTPUT_BYTES × %d): the command was killed", humanBytes(flood), floodFactor)})
	})

	started := time.Now()
	waitErr, startErr := s.startAndWait(ctx, cmd, spec.timeout, kill)
	out.Duration = time.Since(started)
	if startErr != nil {
		return nil, fmt.Errorf("start bwrap: %w", startErr)
	}
	out.ExitCode = exitCode(cmd, waitErr)
	s.classify(out, group)
	return out, nil
}

// startAndWait starts cmd and waits for it on one locked OS thread: the
// parent-death signal is tied to the thread that started the child, so it
// must live as long as the child. The wall time and ctx kill the sandbox.
func (s *Sandbox) startAndWait(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, kill func(LimitHit)) (waitErr, startErr error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if startErr = cmd.Start(); startErr != nil {
			return
		}
		stop, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			t := time.NewTimer(timeout)
			defer t.Stop()
			select {
			case <-t.C:
				kill(LimitHit{LimitTimeout, fmt.Sprintf("the command ran for %s (the wall-time limit, EXEC_TIMEOUT) and was killed with all its processes", timeout)})
			case <-ctx.Done():
				kill(LimitHit{"cancelled", "the run was stopped and the command killed"})
			case <-stop:
			}
		}()
		waitErr = cmd.Wait()
		close(stop)
		<-watched // its kill, if any, is seen by the caller
	}()
	<-done
	return waitErr, startErr
}

func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return -1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// outOfMemory reports whether stderr says a program could not get memory
// (RLIMIT_AS makes allocations fail rather than kill).
func outOfMemory(stderr string) bool {
	for _, s := range []string{"MemoryError", "Cannot allocate memory", "out of memory", "Out of memory", "memory exhausted"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// classify names the limits an exit status or the cgroup shows.
func (s *Sandbox) classify(out *Outcome, group *cgroup) {
	o := s.opts
	stderr := out.Stderr.String()
	switch {
	case out.ExitCode == 128+int(syscall.SIGXCPU) || strings.Contains(stderr, "CPU time limit exceeded"):
		out.Limits = append(out.Limits, LimitHit{LimitCPU, fmt.Sprintf("a process used its %s of CPU time and was stopped", o.CPUTime)})
	case out.ExitCode == 128+int(syscall.SIGXFSZ) || strings.Contains(stderr, "File size limit exceeded"):
		out.Limits = append(out.Limits, LimitHit{LimitFileSize, fmt.Sprintf("a file reached %s, the largest a command may write", humanBytes(o.MaxFileBytes))})
	case out.ExitCode == 128+int(syscall.SIGKILL):
		if !out.Killed {
			out.Limits = append(out.Limits, LimitHit{LimitCPU, fmt.Sprintf("a process was killed; it may have used its %s of CPU time", o.CPUTime)})
		}
	}
	if group.reached("pids") {
		out.Limits = append(out.Limits, LimitHit{LimitProcesses, fmt.Sprintf("the command tried to run more than %d processes at once; the extra ones were refused", o.MaxProcs)})
	}
	if group.reached("memory") || outOfMemory(stderr) {
		out.Limits = append(out.Limits, LimitHit{LimitMemory, fmt.Sprintf("the command reached its memory limit of %s", humanBytes(o.MemoryBytes))})
	}
}
