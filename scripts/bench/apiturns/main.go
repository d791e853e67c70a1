// Command apiturns measures whole agent turns through an OpenAI-compatible
// /v1/chat/completions endpoint (Switchboard's channel api, or a peer's):
// sequential turns (latency percentiles), then concurrent sessions (each its
// own `user`, so its own timeline/session) for throughput. With -pid it
// reads the server's CPU time (utime+stime of the process and its children
// processes, from /proc) and RSS before and after each phase. Each phase
// also reports the whole machine's CPU per turn (…_machine_cpu_ms_per_turn,
// from /proc/stat: server, PostgreSQL, the fake model and this client
// together, and anything else running, so read it on a quiet machine).
//
//	go run ./scripts/bench/apiturns -url http://127.0.0.1:18082 -token T -n 200 -sessions 8 -per 25 -pid 1234
//
// With -ab it compares servers instead, turn by turn: round i's turn goes to
// each server in turn, the order rotated by one each round, so load from
// elsewhere falls on all of them alike; each is then compared with the
// first (ratio of medians and of p95 with a bootstrap 95% interval, and the
// median and quartiles of the paired per-round differences):
//
//	go run ./scripts/bench/apiturns -token T -user "" -n 200 -ab 00=http://127.0.0.1:18082,10=http://127.0.0.1:18083
//
// Output is one "name value" line per figure, for scripts to pick up.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/scripts/bench/internal/proc"
)

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ",") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "server root (…/v1/chat/completions is appended)")
	token := flag.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "bearer token")
	model := flag.String("model", "switchboard", "model field")
	user := flag.String("user", "bench", "user field prefix (sequential turns use <prefix>-seq; empty: no user field)")
	n := flag.Int("n", 200, "sequential turns")
	warm := flag.Int("warmup", 5, "sequential turns before measuring")
	sessions := flag.Int("sessions", 8, "concurrent sessions")
	per := flag.Int("per", 25, "turns per concurrent session")
	pid := flag.Int("pid", 0, "server pid for CPU and RSS readings")
	timeout := flag.Duration("timeout", 120*time.Second, "timeout of one turn")
	prefix := flag.String("label", "", "prefix of every output name")
	ab := flag.String("ab", "", "compare servers turn by turn: label=url,label=url,… (the first is the reference; -n rounds)")
	abPids := flag.String("ab-pids", "", "with -ab: the servers' pids, in the same order, for CPU per turn")
	abRaw := flag.String("ab-raw", "", "with -ab: write every turn's latency here, \"round position label ms\"")
	var hdr headers
	flag.Var(&hdr, "header", "extra request header Name:Value (repeatable)")
	flag.Parse()
	mk := func(url string) *client {
		return &client{url: strings.TrimRight(url, "/") + "/v1/chat/completions", token: *token, model: *model, hdr: hdr,
			http: &http.Client{Timeout: *timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	}
	out := func(name string, v any) { fmt.Printf("%s%s %v\n", *prefix, name, v) }
	if *ab != "" {
		if err := mainAB(abPlan{spec: *ab, pids: *abPids, rawPath: *abRaw, user: *user, rounds: *n, warm: *warm}, mk, out); err != nil {
			fmt.Fprintln(os.Stderr, "apiturns:", err)
			os.Exit(1)
		}
		return
	}
	c := mk(*url)
	if err := run(c, plan{user: *user, n: *n, warm: *warm, sessions: *sessions, per: *per, pid: *pid}, out); err != nil {
		fmt.Fprintln(os.Stderr, "apiturns:", err)
		os.Exit(1)
	}
}

// abPlan is what -ab, -ab-pids, -ab-raw, -user, -n and -warmup ask for.
type abPlan struct {
	spec, pids, rawPath, user string
	rounds, warm              int
}

func mainAB(p abPlan, mk func(string) *client, out func(string, any)) error {
	spec, pids, rawPath, user, rounds, warm := p.spec, p.pids, p.rawPath, p.user, p.rounds, p.warm
	ts, err := parseTargets(spec, pids, mk)
	if err != nil {
		return err
	}
	var raw io.Writer
	if rawPath != "" {
		f, err := os.Create(rawPath)
		if err != nil {
			return err
		}
		defer f.Close()
		raw = f
	}
	if user != "" {
		user += "-ab"
	}
	return runAB(ts, user, rounds, warm, raw, out)
}

type client struct {
	url, token, model string
	hdr               []string
	http              *http.Client
}

// turn sends one message and waits for the whole answer.
func (c *client) turn(user, text string) (time.Duration, error) {
	body := map[string]any{"model": c.model, "messages": []map[string]string{{"role": "user", "content": text}}}
	if user != "" {
		body["user"] = user
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", c.url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	for _, h := range c.hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	t0 := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("status %d: %.300s", resp.StatusCode, rb)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rb, &out); err != nil || len(out.Choices) == 0 || out.Choices[0].Message.Content == "" {
		return 0, fmt.Errorf("no answer in %.300s", rb)
	}
	return d, nil
}

// plan is what -user, -n, -warmup, -sessions, -per and -pid ask for.
type plan struct {
	user                        string
	n, warm, sessions, per, pid int
}

func run(c *client, p plan, out func(string, any)) error {
	user, n, warm, sessions, per, pid := p.user, p.n, p.warm, p.sessions, p.per, p.pid
	seqUser := ""
	if user != "" {
		seqUser = user + "-seq"
	}
	for i := 0; i < warm; i++ {
		if _, err := c.turn(seqUser, fmt.Sprintf("warm-up %d", i)); err != nil {
			return fmt.Errorf("warm-up turn %d: %w", i, err)
		}
	}
	if pid != 0 {
		out("rss_before_mib", fmt.Sprintf("%.1f", proc.RSSMiB(pid)))
	}
	cpu0, all0 := proc.CPUSeconds(pid), proc.MachineCPUSeconds()
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		d, err := c.turn(seqUser, fmt.Sprintf("turn %d: the quick brown fox jumps over the lazy dog", i))
		if err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		lat = append(lat, d)
	}
	seqWall := time.Since(start)
	cpu1, all1 := proc.CPUSeconds(pid), proc.MachineCPUSeconds()
	if n > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		out("seq_turns", n)
		out("seq_p50_ms", ms(pct(lat, 0.50)))
		out("seq_p95_ms", ms(pct(lat, 0.95)))
		out("seq_p99_ms", ms(pct(lat, 0.99)))
		out("seq_max_ms", ms(lat[len(lat)-1]))
		out("seq_turns_per_s", fmt.Sprintf("%.1f", float64(n)/seqWall.Seconds()))
		if pid != 0 {
			out("seq_cpu_ms_per_turn", fmt.Sprintf("%.2f", (cpu1-cpu0)*1000/float64(n)))
		}
		out("seq_machine_cpu_ms_per_turn", fmt.Sprintf("%.2f", (all1-all0)*1000/float64(n)))
	}
	if sessions > 0 && per > 0 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var clat []time.Duration
		var firstErr error
		start := time.Now()
		for s := 0; s < sessions; s++ {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				u := ""
				if user != "" {
					u = fmt.Sprintf("%s-s%d", user, s)
				}
				for i := 0; i < per; i++ {
					d, err := c.turn(u, fmt.Sprintf("session %d turn %d: the quick brown fox", s, i))
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = fmt.Errorf("session %d turn %d: %w", s, i, err)
					}
					clat = append(clat, d)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}(s)
		}
		wg.Wait()
		wall := time.Since(start)
		cpu2, all2 := proc.CPUSeconds(pid), proc.MachineCPUSeconds()
		if firstErr != nil {
			return firstErr
		}
		sort.Slice(clat, func(i, j int) bool { return clat[i] < clat[j] })
		total := sessions * per
		out("conc_sessions", sessions)
		out("conc_turns", total)
		out("conc_turns_per_s", fmt.Sprintf("%.1f", float64(total)/wall.Seconds()))
		out("conc_p50_ms", ms(pct(clat, 0.50)))
		out("conc_p99_ms", ms(pct(clat, 0.99)))
		if pid != 0 {
			out("conc_cpu_ms_per_turn", fmt.Sprintf("%.2f", (cpu2-cpu1)*1000/float64(total)))
		}
		out("conc_machine_cpu_ms_per_turn", fmt.Sprintf("%.2f", (all2-all1)*1000/float64(total)))
	}
	if pid != 0 {
		out("rss_after_mib", fmt.Sprintf("%.1f", proc.RSSMiB(pid)))
	}
	return nil
}

func pct(l []time.Duration, q float64) time.Duration { return l[int(q*float64(len(l)-1))] }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
