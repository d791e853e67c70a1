package web_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkPostToWebsocket measures the latency from sending POST
// /api/messages to the message arriving on every connected websocket, over
// real HTTP, a real PostgreSQL and LISTEN/NOTIFY. Posts are sequential, so
// each latency is one message's path. Run with a fixed count:
//
//	go test -run '^$' -bench PostToWebsocket -benchtime 1000x ./web/
func BenchmarkPostToWebsocket(b *testing.B) {
	for _, clients := range []int{1, 100} {
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
						f, err := c.next(30 * time.Second)
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
				for {
					mu.Lock()
					got := recvAt[m.ID]
					mu.Unlock()
					if len(got) == clients {
						for _, t := range got {
							lat = append(lat, t.Sub(t0))
						}
						break
					}
					time.Sleep(50 * time.Microsecond)
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

// BenchmarkIngest measures POST /api/messages throughput with parallel clients.
//
//	go test -run '^$' -bench Ingest -benchtime 5000x ./web/
func BenchmarkIngest(b *testing.B) {
	in := newInstance(b, newSchemaURL(b))
	b.SetParallelism(4)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			post(b, in.URL, fmt.Sprint("ingest ", i))
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
