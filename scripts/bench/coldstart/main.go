// Command coldstart measures how long a server takes from spawn to a
// healthy /healthz, and its resident memory once idle: it starts the
// command -n times (stopping it in between with SIGTERM), polls the health
// URL every 2 ms, and prints the median and each run. The command inherits
// the environment, so point it at an already-migrated database.
//
//	go run ./scripts/bench/coldstart -n 10 -health http://127.0.0.1:18082/healthz -- ./switchboard serve
//
// With -alt, a second executable takes the command's arguments and the
// starts alternate, a b a b …, -n of each, so that load from elsewhere on
// the machine falls on both alike; each run's line says which it was, and
// the medians are printed per side (a_…, b_…). Each run's line also splits
// the RSS into anonymous memory (heap, stacks, runtime) and the
// executable's file pages (VmRSS = RssAnon + RssFile + RssShmem).
//
//	coldstart -n 5 -alt ./switchboard.new -health … -- ./switchboard.old serve
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard/switchboard/scripts/bench/internal/proc"
)

func main() {
	n := flag.Int("n", 10, "starts")
	health := flag.String("health", "http://127.0.0.1:8080/healthz", "URL that answers 200 once the server is up")
	settle := flag.Duration("settle", 3*time.Second, "idle time before the RSS reading")
	limit := flag.Duration("limit", 120*time.Second, "give up on one start after this long")
	label := flag.String("label", "", "prefix of every output name")
	alt := flag.String("alt", "", "a second executable: starts alternate between the command and this one (same arguments), -n of each")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "coldstart: give the command after --")
		os.Exit(2)
	}
	sides := []string{flag.Arg(0)}
	if *alt != "" {
		sides = append(sides, *alt)
	}
	starts := make([][]time.Duration, len(sides))
	rss := make([][]float64, len(sides))
	client := &http.Client{Timeout: time.Second}
	for i := 0; i < *n*len(sides); i++ {
		side := i % len(sides)
		cmd := exec.Command(sides[side], flag.Args()[1:]...)
		cmd.Stdout, cmd.Stderr = nil, nil
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "coldstart:", err)
			os.Exit(1)
		}
		var up time.Duration
		for time.Since(t0) < *limit {
			resp, err := client.Get(*health)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					up = time.Since(t0)
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		if up == 0 {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			fmt.Fprintf(os.Stderr, "coldstart: run %d not healthy within %s\n", i, *limit)
			os.Exit(1)
		}
		time.Sleep(*settle)
		r := proc.RSSMiB(cmd.Process.Pid)
		anon, file := statusMiB(cmd.Process.Pid, "RssAnon:"), statusMiB(cmd.Process.Pid, "RssFile:")
		starts[side] = append(starts[side], up)
		rss[side] = append(rss[side], r)
		name := fmt.Sprintf("run_%d", i)
		if len(sides) > 1 {
			name = fmt.Sprintf("%c_run_%d", 'a'+side, i/len(sides))
		}
		fmt.Printf("%s%s_start_ms %.1f rss_idle_mib %.1f anon_mib %.1f file_mib %.1f\n", *label, name, float64(up.Microseconds())/1000, r, anon, file)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		// Let the port be released before the next start.
		for j := 0; j < 500; j++ {
			if _, err := client.Get(*health); err != nil && strings.Contains(err.Error(), "refused") {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for side := range sides {
		prefix := *label
		if len(sides) > 1 {
			prefix += fmt.Sprintf("%c_", 'a'+side)
			fmt.Printf("%sbinary %s\n", prefix, sides[side])
		}
		st, rs := starts[side], rss[side]
		sort.Slice(st, func(i, j int) bool { return st[i] < st[j] })
		sort.Float64s(rs)
		fmt.Printf("%sstart_median_ms %.1f\n", prefix, float64(st[len(st)/2].Microseconds())/1000)
		fmt.Printf("%sstart_min_ms %.1f\n", prefix, float64(st[0].Microseconds())/1000)
		fmt.Printf("%sstart_max_ms %.1f\n", prefix, float64(st[len(st)-1].Microseconds())/1000)
		fmt.Printf("%srss_idle_median_mib %.1f\n", prefix, rs[len(rs)/2])
		fmt.Printf("%srss_idle_min_mib %.1f\n", prefix, rs[0])
		fmt.Printf("%srss_idle_max_mib %.1f\n", prefix, rs[len(rs)-1])
	}
}

// statusMiB is the field name of /proc/pid/status, in MiB (0 when absent).
func statusMiB(pid int, name string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
