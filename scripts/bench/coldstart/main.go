// Command coldstart measures how long a server takes from spawn to a
// healthy /healthz, and its resident memory once idle: it starts the
// command -n times (stopping it in between with SIGTERM), polls the health
// URL every 2 ms, and prints the median and each run. The command inherits
// the environment, so point it at an already-migrated database.
//
//	go run ./scripts/bench/coldstart -n 10 -health http://127.0.0.1:18082/healthz -- ./switchboard serve
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
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
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "coldstart: give the command after --")
		os.Exit(2)
	}
	var starts []time.Duration
	var rss []float64
	client := &http.Client{Timeout: time.Second}
	for i := 0; i < *n; i++ {
		cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
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
		starts = append(starts, up)
		rss = append(rss, r)
		fmt.Printf("%srun_%d_start_ms %.1f rss_idle_mib %.1f\n", *label, i, float64(up.Microseconds())/1000, r)
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
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	sort.Float64s(rss)
	fmt.Printf("%sstart_median_ms %.1f\n", *label, float64(starts[len(starts)/2].Microseconds())/1000)
	fmt.Printf("%sstart_min_ms %.1f\n", *label, float64(starts[0].Microseconds())/1000)
	fmt.Printf("%sstart_max_ms %.1f\n", *label, float64(starts[len(starts)-1].Microseconds())/1000)
	fmt.Printf("%srss_idle_median_mib %.1f\n", *label, rss[len(rss)/2])
}
