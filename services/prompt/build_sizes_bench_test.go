package prompt_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
)

// BenchmarkBuildSizes measures ContextManager.Build for a scope with 200
// recent turns (and rules, settings, a summary segment, 60 archived
// handoffs that share words with the input) in chat_messages
// tables of the sizes in BENCH_BUILD_ROWS (default 1k,10k,100k,1M; the
// other rows spread over 1,000 other timelines), p50/p95 per size, with
// and (no-recall-*) without the retrieval of archived handoffs. Run on
// purpose:
//
//	go test -run '^$' -bench BuildSizes -benchtime 300x -timeout 60m ./services/prompt/
func BenchmarkBuildSizes(b *testing.B) {
	sizes := []int{1_000, 10_000, 100_000, 1_000_000}
	if v := os.Getenv("BENCH_BUILD_ROWS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1000 {
				b.Fatalf("BENCH_BUILD_ROWS: bad size %q (at least 1000)", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, total := range sizes {
		b.Run(fmt.Sprintf("rows=%d", total), func(b *testing.B) {
			ctx := context.Background()
			pool, _ := dbtest.Schema(b)
			s := repository.New(pool)
			dbtest.Exec(b, pool, `
				INSERT INTO chat_messages (timeline_scope, context_scope, role, source, content, visible, token_count)
				SELECT 'tg:' || (g % 1000), 'main', CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'telegram',
				       'background message number ' || g, 1, 8
				FROM generate_series(1, $1) g`, max(0, total-400))
			// 60 archived handoffs of earlier sub-agents (the retrieved layer
			// ranks the 50 newest against the input).
			var lastHandoff int64 = 1
			for i := 0; i < 60; i++ {
				h, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "tool", Source: "agent",
					Content:  fmt.Sprintf(`{"version":1,"kind":"handoff","run_id":%d,"agent_id":"researcher","status":"ok","summary":"research result %d","result":"a typical finding in a few words, number %d"}`, i+1, i, i),
					Metadata: services.MessageMeta{Kind: services.MetaHandoff, ChildRunID: int64(i + 1), ToolName: "delegate"}.Encode()})
				if err != nil {
					b.Fatal(err)
				}
				lastHandoff = h.ID
			}
			if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "main", FromMessageID: 1, UntilMessageID: lastHandoff,
				SummaryText: "## Archived Session Summary\nEarlier talk.", TokenCount: 10}); err != nil {
				b.Fatal(err)
			}
			last := seedTurns(b, s, "global", 200, "a typical message of a few words")
			for i := 0; i < 5; i++ {
				_, _ = s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: fmt.Sprint("rule ", i), Hard: true})
				_, _ = s.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: fmt.Sprint("k", i), Value: "v", Confidence: 0.5})
			}
			dbtest.Exec(b, pool, `ANALYZE`)
			m := mustNew(b, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Tokenizer: prompt.HeuristicTokenizer{}}, prompt.Config{Window: 128000, ScopedRead: true})
			// The same builds without the archive (no Recall: no handoff
			// retrieval) and without the one-statement sources, interleaved
			// so both see the same machine load.
			plain := mustNew(b, prompt.Deps{Store: s, Context: s, Tokenizer: prompt.HeuristicTokenizer{}}, prompt.Config{Window: 128000, ScopedRead: true})
			lat := make([]time.Duration, 0, b.N)
			latPlain := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: last})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if n := len(p.Request.Messages); n < 399 {
					b.Fatalf("prompt has %d messages, want the 200 turns", n)
				}
				// The retrieved layer goes after history, just before the
				// current input (docs/CONTEXT.md).
				if !retrievedBeforeInput(p.Request.Messages) {
					b.Fatalf("no archived handoff was retrieved before the input")
				}
				t0 = time.Now()
				if _, err := plain.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: last}); err != nil {
					b.Fatal(err)
				}
				latPlain = append(latPlain, time.Since(t0))
			}
			b.StopTimer()
			for _, l := range [][]time.Duration{lat, latPlain} {
				sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			}
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(float64(latPlain[len(latPlain)/2].Microseconds())/1000, "no-recall-p50-ms")
			b.ReportMetric(float64(latPlain[len(latPlain)*95/100].Microseconds())/1000, "no-recall-p95-ms")
		})
	}
}

// retrievedBeforeInput reports whether the retrieved layer (and its
// "Noted.") comes right before the current input, the last user message.
func retrievedBeforeInput(msgs []llm.Message) bool {
	for i := len(msgs) - 1; i >= 2; i-- {
		if msgs[i].Role == llm.RoleUser {
			return strings.HasPrefix(msgs[i-2].Content, "## Retrieved for this turn") && msgs[i-1].Content == "Noted."
		}
	}
	return false
}
