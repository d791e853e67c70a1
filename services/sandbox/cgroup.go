package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// cgroups are the writable cgroup directories under which each run gets a
// cgroup of its own, per controller ("pids", "memory"): the service's own
// cgroup in the unified (v2) hierarchy when it delegates the controller,
// else the controller's v1 hierarchy. A nil *cgroups has none.
type cgroups struct {
	base map[string]string // controller → parent directory
	v2   map[string]bool
	seq  atomic.Int64
}

// limitFile is the file that bounds a controller, per version.
func limitFile(controller string, v2 bool) string {
	switch {
	case controller == "pids":
		return "pids.max"
	case v2:
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

// findCgroups finds, per controller, a parent directory where a child
// cgroup can be made and bounded. It tries by making one.
func findCgroups(root string, log *slog.Logger) *cgroups {
	own := ownCgroups()
	cg := &cgroups{base: map[string]string{}, v2: map[string]bool{}}
	for _, c := range []string{"pids", "memory"} {
		var candidates []struct {
			dir string
			v2  bool
		}
		if p, ok := own[""]; ok {
			if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
				candidates = append(candidates, struct {
					dir string
					v2  bool
				}{filepath.Join(root, p), true})
			}
		}
		if p, ok := own[c]; ok {
			candidates = append(candidates, struct {
				dir string
				v2  bool
			}{filepath.Join(root, c, p), false})
		}
		for _, cand := range candidates {
			probe := filepath.Join(cand.dir, fmt.Sprintf("switchboard-exec-probe-%d", os.Getpid()))
			if err := os.Mkdir(probe, 0o755); err != nil {
				continue
			}
			_, err := os.Stat(filepath.Join(probe, limitFile(c, cand.v2)))
			_ = os.Remove(probe)
			if err == nil {
				cg.base[c], cg.v2[c] = cand.dir, cand.v2
				break
			}
		}
	}
	for _, base := range cg.base {
		removeStale(base)
	}
	log.Info("exec sandbox cgroups", "pids", cg.base["pids"], "memory", cg.base["memory"])
	return cg
}

// removeStale removes the run cgroups of services that died (kill -9)
// before removing theirs: named switchboard-exec-<pid>-<n> for a pid that
// is gone. Their processes died with the service; an empty cgroup is all
// that is left.
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "switchboard-exec-*"))
	for _, d := range dirs {
		var pid, n int
		if _, err := fmt.Sscanf(filepath.Base(d), "switchboard-exec-%d-%d", &pid, &n); err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.Remove(d)
		}
	}
}

// ownCgroups reads /proc/self/cgroup: controller → path ("" for v2).
func ownCgroups() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

func (cg *cgroups) has(controller string) bool {
	return cg != nil && cg.base[controller] != ""
}

// cgroup is one run's cgroup: a directory per hierarchy.
type cgroup struct {
	dirs map[string]string // controller → directory
	v2   map[string]bool
}

// create makes the run's cgroup with its bounds. With no cgroups it
// returns an empty cgroup (every method a no-op).
func (cg *cgroups) create(maxProcs int, memory int64) (*cgroup, error) {
	g := &cgroup{dirs: map[string]string{}, v2: map[string]bool{}}
	if cg == nil {
		return g, nil
	}
	name := fmt.Sprintf("switchboard-exec-%d-%d", os.Getpid(), cg.seq.Add(1))
	for _, c := range []string{"pids", "memory"} {
		base := cg.base[c]
		if base == "" {
			continue
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			g.remove()
			return nil, fmt.Errorf("sandbox cgroup: %w", err)
		}
		g.dirs[c], g.v2[c] = dir, cg.v2[c]
		value := strconv.Itoa(maxProcs)
		if c == "memory" {
			value = strconv.FormatInt(memory, 10)
		}
		if err := os.WriteFile(filepath.Join(dir, limitFile(c, cg.v2[c])), []byte(value), 0o644); err != nil {
			g.remove()
			return nil, fmt.Errorf("sandbox cgroup %s: %w", c, err)
		}
		if c == "memory" && cg.v2[c] {
			_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
		}
	}
	return g, nil
}

// procsFiles are the cgroup.procs files the sandbox's first process
// writes itself into, space-separated.
func (g *cgroup) procsFiles() string {
	seen := map[string]bool{}
	var files []string
	for _, d := range g.dirs {
		if !seen[d] {
			seen[d] = true
			files = append(files, filepath.Join(d, "cgroup.procs"))
		}
	}
	sort.Strings(files)
	return strings.Join(files, " ")
}

// kill kills every process left in the cgroup.
func (g *cgroup) kill() {
	for _, d := range g.dirs {
		if os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0o644) == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// remove kills what is left and removes the directories (retrying while
// the last processes exit).
func (g *cgroup) remove() {
	for _, d := range g.dirs {
		for i := 0; ; i++ {
			g.kill()
			err := os.Remove(d)
			if err == nil || os.IsNotExist(err) || i >= 100 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// reached reports whether the run hit the controller's bound.
func (g *cgroup) reached(controller string) bool {
	d := g.dirs[controller]
	if d == "" {
		return false
	}
	if controller == "memory" && !g.v2[controller] {
		b, err := os.ReadFile(filepath.Join(d, "memory.failcnt"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && n > 0
	}
	file, key := "pids.events", "max"
	if controller == "memory" {
		file, key = "memory.events", "max"
	}
	b, err := os.ReadFile(filepath.Join(d, file))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key && f[1] != "0" {
			return true
		}
	}
	return false
}
