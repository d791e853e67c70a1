package contextmgr_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/contextmgr"
)

// BenchmarkBuild measures ContextManager.Build for a scope with 200 recent
// turns (and rules, settings, a summary segment) in a chat_messages table of
// 10k and of 1M rows (the rest spread over 1,000 other timelines). Run:
//
//	go test -run '^$' -bench Build -benchtime 300x ./services/contextmgr/
func BenchmarkBuild(b *testing.B) {
	for _, total := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", total), func(b *testing.B) {
			ctx := context.Background()
			pool, _ := dbtest.Schema(b)
			s := repository.New(pool)
			// Background rows of other timelines, written in bulk.
			dbtest.Exec(b, pool, `
				INSERT INTO chat_messages (timeline_scope, context_scope, role, source, content, visible, token_count)
				SELECT 'tg:' || (g % 1000), 'main', CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'telegram',
				       'background message number ' || g, 1, 8
				FROM generate_series(1, $1) g`, total-400)
			seg := contextmgr.HeuristicTokenizer{}
			if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: 1, UntilMessageID: 1,
				SummaryText: "## Archived Session Summary\nEarlier talk.", TokenCount: 10}); err != nil {
				b.Fatal(err)
			}
			last := seedTurns(b, s, "global", 200, "a typical message of a few words")
			for i := 0; i < 5; i++ {
				_, _ = s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: fmt.Sprint("rule ", i), Hard: true})
				_, _ = s.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: fmt.Sprint("k", i), Value: "v", Confidence: 0.5})
			}
			dbtest.Exec(b, pool, `ANALYZE`)
			m := contextmgr.New(contextmgr.Options{Store: s, Context: s, Tokenizer: seg, Window: 128000, ScopedRead: true})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				p, err := m.Build(ctx, contextmgr.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: last})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if n := len(p.Request.Messages); n < 399 {
					b.Fatalf("prompt has %d messages, want the 200 turns", n)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}
