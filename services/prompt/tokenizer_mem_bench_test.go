package prompt_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services/prompt"
)

// loadHeap and loadMS are each encoding's heap and load time, measured when
// the benchmark first loads it.
var loadHeap, loadMS = map[string]float64{}, map[string]float64{}

// BenchmarkTokenizerMemory reports the memory a loaded tiktoken encoding
// keeps (heap-MiB on the Go heap, table-MiB its rank table, which is kept
// outside the heap on Unix), and the cost of counting a typical message once
// loaded. Run on purpose:
//
//	go test -run '^$' -bench TokenizerMemory -benchtime 1000x ./services/prompt/
func BenchmarkTokenizerMemory(b *testing.B) {
	for _, model := range []string{"gpt-4o-mini", "claude-sonnet-4-5"} {
		b.Run(prompt.EncodingForModel(model), func(b *testing.B) {
			enc := prompt.EncodingForModel(model)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			tk, err := prompt.NewTokenizer(model)
			if err != nil {
				b.Fatal(err)
			}
			tk.Count("warm up")
			if _, ok := loadMS[enc]; !ok {
				loadMS[enc] = float64(time.Since(start).Microseconds()) / 1000
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if _, ok := loadHeap[enc]; !ok {
				loadHeap[enc] = float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / (1 << 20)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tk.Count("turn 12: the quick brown fox jumps over the lazy dog")
			}
			b.StopTimer()
			b.ReportMetric(loadHeap[enc], "heap-MiB")
			b.ReportMetric(prompt.TableMiB(enc), "table-MiB")
			b.ReportMetric(loadMS[enc], "load-ms")
		})
	}
}
