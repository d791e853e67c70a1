package web_test

import (
	"fmt"
	"testing"
	"time"
)

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
