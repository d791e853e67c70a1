package agent_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// BenchmarkTurnCPU measures one main turn (post → answer, the fake model
// answering at once) at timelines of 100, 10,000 and 100,000 messages, at
// the default context settings (128k window, CONTEXT_HISTORY_TOKENS
// 12,000, compaction on the working set with a summariser that answers at
// once). Per turn: the CPU of this process (the service, the in-process
// fake model and the harness; PostgreSQL's own CPU is not in it), the
// wall time p50/p95, and the estimated prompt tokens of the last run.
// Timelines over 100 messages start compacted up to their last 100 (the
// state compaction keeps a long conversation in); five turns warm each
// size up.
// Run on purpose:
//
//	go test -run '^$' -bench TurnCPU -benchtime 30x -timeout 30m ./services/agent/
func BenchmarkTurnCPU(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			bd := setupBench(b, services.Flags{ScopedWrite: true, ScopedRead: true}, 0)
			bd.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
				if isSummaryCall(r) {
					return llmtest.Text(validSummary)
				}
				return llmtest.Echo(r)
			})
			dbtest.Exec(b, bd.db, `
				INSERT INTO chat_messages (timeline_scope, context_scope, role, source, content, visible, token_count)
				SELECT 'global', 'main', CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END, 'web',
				       'message number ' || g || ' of a long conversation, a sentence or two of ordinary talk between the owner and the agent', 1, 0
				FROM generate_series(1, $1) g`, n)
			// A long conversation at its steady state: compaction has
			// archived all but the last 100 messages (one segment per
			// summary scope), as it would have along the way.
			if n > 100 {
				var until int64
				if err := bd.db.QueryRow(context.Background(), `SELECT id FROM chat_messages ORDER BY id OFFSET $1 LIMIT 1`, n-101).Scan(&until); err != nil {
					b.Fatal(err)
				}
				for _, scope := range []string{"global", "main"} {
					if _, err := bd.store.AppendSegment(context.Background(), services.Segment{TimelineScope: "global", Scope: scope, FromMessageID: 1,
						UntilMessageID: until, SummaryText: validSummary, TokenCount: 60}); err != nil {
						b.Fatal(err)
					}
				}
			}
			dbtest.Exec(b, bd.db, `ANALYZE chat_messages`)
			answers := 0
			turn := func(i int) {
				bd.sayB(b, fmt.Sprintf("turn %d: a short question for the agent", i))
				answers++
				bd.waitAnswers(b, answers)
			}
			for i := 0; i < 5; i++ {
				turn(-i - 1)
			}
			lat := make([]time.Duration, 0, b.N)
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				turn(i)
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			cpu := processCPU() - cpu0
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			runs, err := bd.store.ListRuns(context.Background(), services.RunQuery{TimelineScope: "global", Limit: 1})
			if err != nil || len(runs) == 0 {
				b.Fatalf("runs: %v", err)
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/turn")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(float64(runs[0].EstimatedPromptTokens), "prompt-tokens")
			var segs int
			_ = bd.db.QueryRow(context.Background(), `SELECT count(*) FROM chat_summary_segments`).Scan(&segs)
			b.ReportMetric(float64(segs), "summary-segments")
			if strings.Contains(fmt.Sprint(runs[0].Status), "error") {
				b.Fatalf("last run: %+v", runs[0])
			}
		})
	}
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
