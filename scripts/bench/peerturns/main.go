// Command peerturns measures whole agent turns through a peer gateway's
// websocket chat channel that speaks JSON frames of the form
// {"type":"message.send","session_id":…,"payload":{"content":…}} (client to
// server) and answers with "message.create" / "message.update" frames whose
// payload carries the content; "typing.*", thought and tool-call frames and
// placeholders are skipped. One connection per session (its session_id in
// the URL's query), a bearer token in the Authorization header. The figures
// have apiturns' names (seq_p50_ms, conc_turns_per_s, rss_after_mib, …) so
// the side-by-side tables line up.
//
//	go run ./scripts/bench/peerturns -url ws://127.0.0.1:19790/pico/ws -token T -n 200 -sessions 8 -per 25 -pid 1234
//
// Output is one "name value" line per figure, for scripts to pick up.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard/switchboard/scripts/bench/internal/proc"
)

func main() {
	wsURL := flag.String("url", "ws://127.0.0.1:18790/pico/ws", "the channel's websocket URL")
	token := flag.String("token", "", "bearer token")
	n := flag.Int("n", 200, "sequential turns")
	warm := flag.Int("warmup", 5, "sequential turns before measuring")
	sessions := flag.Int("sessions", 8, "concurrent sessions")
	per := flag.Int("per", 25, "turns per concurrent session")
	pid := flag.Int("pid", 0, "server pid for CPU and RSS readings")
	timeout := flag.Duration("timeout", 120*time.Second, "timeout of one turn")
	prefix := flag.String("label", "", "prefix of every output name")
	flag.Parse()
	out := func(name string, v any) { fmt.Printf("%s%s %v\n", *prefix, name, v) }
	d := dialer{url: *wsURL, token: *token, timeout: *timeout}
	if err := run(d, plan{n: *n, warm: *warm, sessions: *sessions, per: *per, pid: *pid}, out); err != nil {
		fmt.Fprintln(os.Stderr, "peerturns:", err)
		os.Exit(1)
	}
}

type dialer struct {
	url, token string
	timeout    time.Duration
}

// session is one websocket connection, one conversation.
type session struct {
	conn    *websocket.Conn
	id      string
	timeout time.Duration
}

func (d dialer) open(ctx context.Context, id string) (*session, error) {
	u, err := url.Parse(d.url)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("session_id", id)
	u.RawQuery = q.Encode()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, u.String(), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + d.token}},
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", d.url, err)
	}
	conn.SetReadLimit(4 << 20)
	return &session{conn: conn, id: id, timeout: d.timeout}, nil
}

type frame struct {
	Type      string         `json:"type"`
	ID        string         `json:"id,omitempty"`
	SessionID string         `json:"session_id,omitempty"`
	Payload   map[string]any `json:"payload,omitempty"`
}

// turn sends one message and waits for the answer's first content frame.
func (s *session) turn(ctx context.Context, text string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, _ := json.Marshal(frame{Type: "message.send", SessionID: s.id, Payload: map[string]any{"content": text}})
	t0 := time.Now()
	if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return 0, err
	}
	for {
		_, data, err := s.conn.Read(ctx)
		if err != nil {
			return 0, err
		}
		var f frame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		switch f.Type {
		case "error":
			return 0, fmt.Errorf("error frame: %.300s", data)
		case "message.create", "message.update":
			if answer(f.Payload) {
				return time.Since(t0), nil
			}
		}
	}
}

// answer: a frame with content that is not a placeholder, thought or
// tool-call notice.
func answer(p map[string]any) bool {
	c, _ := p["content"].(string)
	if c == "" {
		return false
	}
	if ph, _ := p["placeholder"].(bool); ph {
		return false
	}
	if th, _ := p["thought"].(bool); th {
		return false
	}
	k, _ := p["kind"].(string)
	return k == ""
}

type plan struct{ n, warm, sessions, per, pid int }

func run(d dialer, p plan, out func(string, any)) error {
	ctx := context.Background()
	seq, err := d.open(ctx, fmt.Sprintf("bench-seq-%d", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	defer seq.conn.CloseNow()
	for i := 0; i < p.warm; i++ {
		if _, err := seq.turn(ctx, fmt.Sprintf("warm-up %d", i)); err != nil {
			return fmt.Errorf("warm-up turn %d: %w", i, err)
		}
	}
	if p.pid != 0 {
		out("rss_before_mib", fmt.Sprintf("%.1f", proc.RSSMiB(p.pid)))
	}
	cpu0 := proc.CPUSeconds(p.pid)
	lat := make([]time.Duration, 0, p.n)
	start := time.Now()
	for i := 0; i < p.n; i++ {
		d, err := seq.turn(ctx, fmt.Sprintf("turn %d: the quick brown fox jumps over the lazy dog", i))
		if err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		lat = append(lat, d)
	}
	seqWall := time.Since(start)
	cpu1 := proc.CPUSeconds(p.pid)
	if p.n > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		out("seq_turns", p.n)
		out("seq_p50_ms", ms(pct(lat, 0.50)))
		out("seq_p95_ms", ms(pct(lat, 0.95)))
		out("seq_p99_ms", ms(pct(lat, 0.99)))
		out("seq_max_ms", ms(lat[len(lat)-1]))
		out("seq_turns_per_s", fmt.Sprintf("%.1f", float64(p.n)/seqWall.Seconds()))
		if p.pid != 0 {
			out("seq_cpu_ms_per_turn", fmt.Sprintf("%.2f", (cpu1-cpu0)*1000/float64(p.n)))
		}
	}
	if p.sessions > 0 && p.per > 0 {
		if err := concurrent(ctx, d, p, cpu1, out); err != nil {
			return err
		}
	}
	if p.pid != 0 {
		out("rss_after_mib", fmt.Sprintf("%.1f", proc.RSSMiB(p.pid)))
	}
	return nil
}

// concurrent runs p.sessions sessions of p.per turns at once, each on its
// own connection; cpu1 is the CPU reading before them.
func concurrent(ctx context.Context, d dialer, p plan, cpu1 float64, out func(string, any)) error {
	conns := make([]*session, p.sessions)
	for s := range conns {
		c, err := d.open(ctx, fmt.Sprintf("bench-s%d-%d", s, time.Now().UnixNano()))
		if err != nil {
			return err
		}
		defer c.conn.CloseNow()
		conns[s] = c
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var clat []time.Duration
	var errs []error
	start := time.Now()
	for s, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < p.per; i++ {
				d, err := c.turn(ctx, fmt.Sprintf("session %d turn %d: the quick brown fox", s, i))
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("session %d turn %d: %w", s, i, err))
				} else {
					clat = append(clat, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu2 := proc.CPUSeconds(p.pid)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	sort.Slice(clat, func(i, j int) bool { return clat[i] < clat[j] })
	total := p.sessions * p.per
	out("conc_sessions", p.sessions)
	out("conc_turns", total)
	out("conc_turns_per_s", fmt.Sprintf("%.1f", float64(total)/wall.Seconds()))
	out("conc_p50_ms", ms(pct(clat, 0.50)))
	out("conc_p99_ms", ms(pct(clat, 0.99)))
	if p.pid != 0 {
		out("conc_cpu_ms_per_turn", fmt.Sprintf("%.2f", (cpu2-cpu1)*1000/float64(total)))
	}
	return nil
}

func pct(l []time.Duration, q float64) time.Duration { return l[int(q*float64(len(l)-1))] }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
