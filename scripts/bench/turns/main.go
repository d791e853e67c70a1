// Command turns measures whole agent turns against a running Switchboard:
// it posts a message, waits for the agent's answer on the websocket, and
// reports latency percentiles. With the fake model at 0 ms (fakellm), the
// latency is Switchboard's own per-turn overhead. With -pid it also reports
// the server's RSS before and after.
//
//	go run ./scripts/bench/turns -url http://127.0.0.1:8080 -token T -n 1000 -pid $(pgrep -f 'switchboard serve')
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

type frame struct {
	Type    string `json:"type"`
	Message *struct {
		ID       int64           `json:"id"`
		Role     string          `json:"role"`
		Source   string          `json:"source"`
		Metadata json.RawMessage `json:"metadata"`
	} `json:"message"`
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "server URL")
	token := flag.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "owner token")
	n := flag.Int("n", 200, "turns")
	pid := flag.Int("pid", 0, "server pid for RSS readings")
	flag.Parse()
	if err := run(*url, *token, *n, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "turns:", err)
		os.Exit(1)
	}
}

func rss(pid int) string {
	if pid == 0 {
		return "-"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "?"
}

func run(base, token string, n, pid int) error {
	ctx := context.Background()
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/ws", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	var mu sync.Mutex
	answered := map[int64]time.Time{} // reply_to -> arrival
	go func() {
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var f frame
			if json.Unmarshal(b, &f) != nil || f.Type != "message" || f.Message.Role != "assistant" {
				continue
			}
			var meta struct {
				ReplyTo int64 `json:"reply_to"`
			}
			_ = json.Unmarshal(f.Message.Metadata, &meta)
			mu.Lock()
			answered[meta.ReplyTo] = time.Now()
			mu.Unlock()
		}
	}()
	fmt.Printf("RSS before: %s\n", rss(pid))
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		body, _ := json.Marshal(map[string]string{"content": fmt.Sprintf("turn %d: the quick brown fox", i)})
		req, _ := http.NewRequest("POST", base+"/api/messages", bytes.NewReader(body))
		req.Header = hdr.Clone()
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var out struct {
			Message struct{ ID int64 } `json:"message"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("post: status %d", resp.StatusCode)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			at, ok := answered[out.Message.ID]
			mu.Unlock()
			if ok {
				lat = append(lat, at.Sub(t0))
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("turn %d: no answer in 30s", i)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	total := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	fmt.Printf("turns: %d in %s (%.1f turns/s)\n", n, total.Round(time.Millisecond), float64(n)/total.Seconds())
	fmt.Printf("post→answer latency: p50 %s  p95 %s  p99 %s  max %s\n", p(0.5).Round(10*time.Microsecond), p(0.95).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
	fmt.Printf("RSS after: %s\n", rss(pid))
	return nil
}
