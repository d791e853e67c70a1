// Package proc reads a process tree's CPU time and resident memory from
// /proc, for the benchmark tools (Linux only).
package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Tree is pid and its descendants (a peer may run helper processes).
func Tree(pid int) []int {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := fieldsAfterComm(string(b))
		if len(f) < 2 {
			continue
		}
		self, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], self)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// fieldsAfterComm splits /proc/pid/stat after the ")" of the command name:
// [0] is state, [1] ppid, [11] utime, [12] stime.
func fieldsAfterComm(s string) []string {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// CPUSeconds is utime+stime of pid's process tree (clock ticks of 1/100 s).
func CPUSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	var ticks int64
	for _, p := range Tree(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := fieldsAfterComm(string(b))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return float64(ticks) / 100
}

// RSSMiB is the resident set of pid's process tree.
func RSSMiB(pid int) float64 {
	var kb int64
	for _, p := range Tree(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				kb += n
			}
		}
	}
	return float64(kb) / 1024
}

// MachineCPUSeconds is the CPU time every process on the machine has used
// since boot (/proc/stat: user, nice, system, irq, softirq and steal;
// idle and iowait left out). The difference over a workload is the CPU
// of all its processes (server, PostgreSQL, the fake model, the client),
// and of anything else that ran: read it on a quiet machine.
func MachineCPUSeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return float64(ticks) / 100
}
