package web_test

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkDeliveryScale measures the latency from sending POST
// /api/messages to the message arriving on every connected websocket, over
// real HTTP, a real PostgreSQL and LISTEN/NOTIFY, for the client counts in
// BENCH_WS_CLIENTS (default 1,100,1000). Posts are sequential, so each
// latency is one message's path.
// 1,000 websockets in one process need `ulimit -n 8192`. Run on purpose:
//
//	go test -run '^$' -bench DeliveryScale -benchtime 300x ./web/
func BenchmarkDeliveryScale(b *testing.B) {
	counts := []int{1, 100, 1000}
	if v := os.Getenv("BENCH_WS_CLIENTS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("BENCH_WS_CLIENTS: bad count %q", f)
			}
			counts = append(counts, n)
		}
	}
	for _, clients := range counts {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			in := newInstance(b, newSchemaURL(b))
			var mu sync.Mutex
			recvAt := map[int64][]time.Time{}
			var wg sync.WaitGroup
			for i := 0; i < clients; i++ {
				c := dialWS(b, in.URL, "?after=0")
				c.untilReady()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						f, err := c.next(60 * time.Second)
						if err != nil {
							return
						}
						if f.Type == "message" {
							now := time.Now()
							mu.Lock()
							recvAt[f.Message.ID] = append(recvAt[f.Message.ID], now)
							mu.Unlock()
						}
					}
				}()
			}
			lat := make([]time.Duration, 0, b.N*clients)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				m := post(b, in.URL, fmt.Sprint("bench ", i))
				var got []time.Time
				if !pollEvery(30*time.Second, 50*time.Microsecond, func() bool {
					mu.Lock()
					got = recvAt[m.ID]
					mu.Unlock()
					return len(got) == clients
				}) {
					b.Fatalf("message %d reached %d of %d clients in 30s", m.ID, len(got), clients)
				}
				for _, t := range got {
					lat = append(lat, t.Sub(t0))
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 {
				return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(len(lat)), "deliveries")
		})
	}
}
