package prompt_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/prompt"
)

// BenchmarkWorkingSetPrompt measures the prompt of the next turn at
// timelines of 100, 10,000 and 100,000 messages (never compacted: the working set
// alone bounds it) at the default settings (128k window,
// CONTEXT_HISTORY_TOKENS 12,000, 10 kept turns): estimated prompt tokens
// and Build p50/p95. Run on purpose:
//
//	go test -run '^$' -bench WorkingSetPrompt -benchtime 50x ./services/prompt/
func BenchmarkWorkingSetPrompt(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			ctx := context.Background()
			pool, _ := dbtest.Schema(b)
			s := repository.New(pool)
			dbtest.Exec(b, pool, `
				INSERT INTO chat_messages (timeline_scope, context_scope, role, source, content, visible, token_count)
				SELECT 'global', 'main', CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END, 'web',
				       'message number ' || g || ' of a long conversation, a sentence or two of ordinary talk between the owner and the agent', 1, 0
				FROM generate_series(1, $1) g`, n)
			var last int64
			if err := pool.QueryRow(ctx, `SELECT max(id) FROM chat_messages WHERE role = 'user'`).Scan(&last); err != nil {
				b.Fatal(err)
			}
			m := mustNew(b, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 128000, ScopedRead: true})
			lat := make([]time.Duration, 0, b.N)
			tokens := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: last})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				tokens = p.Inspection.TotalTokens
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(tokens), "prompt-tokens")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}
