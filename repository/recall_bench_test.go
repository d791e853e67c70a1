package repository_test

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
)

// BenchmarkRecallSearch measures a recall_search as the tool runs it (all
// words; any word when nothing has them all; limit 10) from main, over
// chat_messages tables of the sizes in BENCH_RECALL_ROWS (default
// 100k,1M). Half the rows are the searched timeline's (80 % main, 10 % a
// sub-agent's scope, 10 % a schedule's), half spread over 1,000 other
// timelines. Each row is 12 words drawn from 5,000 with a skewed
// distribution (the most common word is in about half the rows, as "the"
// would be; the 100th in about 1 %), and one row in ten also has a
// distinctive word (k0…k999, each in 0.01 % of the rows: names, codes,
// numbers, what recall is asked for). Two sub-benchmarks per size:
// distinctive queries, and queries made only of common words. p50, p95 and
// max. Run on purpose:
//
//	BENCH_RECALL_ROWS=1000000 go test -run '^$' -bench RecallSearch -benchtime 200x -timeout 60m ./repository/
func BenchmarkRecallSearch(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if v := os.Getenv("BENCH_RECALL_ROWS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1000 {
				b.Fatalf("BENCH_RECALL_ROWS: bad size %q (at least 1000)", f)
			}
			sizes = append(sizes, n)
		}
	}
	classes := []struct {
		name    string
		queries []string
	}{
		{"distinctive", []string{
			"k17",            // a name or code
			"k250 w3",        // a distinctive word and a common one
			"k999 k5",        // two that no row has together: the any-word pass
			"nothingmatches", // no row: both passes run
		}},
		{"common", []string{
			"w3 w40",         // common words: many rows have both
			"w120 w900",      // each in about 1 % of the rows
			"w0",             // in about half the rows
			"w777 w1500 w60", // three terms, any-word pass
		}},
	}
	for _, total := range sizes {
		b.Run(fmt.Sprintf("rows=%d", total), func(b *testing.B) {
			ctx := context.Background()
			pool, _ := dbtest.Schema(b)
			s := repository.New(pool)
			dbtest.Exec(b, pool, `
				INSERT INTO chat_messages (timeline_scope, context_scope, role, source, content, visible, token_count)
				SELECT CASE WHEN g % 2 = 0 THEN 'global' ELSE 'tg:' || (g % 1000) END,
				       CASE WHEN g % 20 = 2 THEN 'run:' || (g / 20) WHEN g % 20 = 4 THEN 'sched:1' ELSE 'main' END,
				       CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'web',
				       (SELECT string_agg('w' || floor(power(random(), 3) * 5000)::int, ' ') FROM generate_series(1, 12) WHERE g > 0)
				         || CASE WHEN g % 10 = 0 THEN ' k' || ((g / 10) % 1000) ELSE '' END,
				       CASE WHEN g % 20 IN (2, 4) THEN 0 ELSE 1 END, 20
				FROM generate_series(1, $1) g`, total)
			dbtest.Exec(b, pool, `VACUUM ANALYZE chat_messages`)
			view := services.NewRecallView("global", "main", "main")
			for _, class := range classes {
				b.Run(class.name, func(b *testing.B) {
					lat := make([]time.Duration, 0, b.N)
					for i := 0; i < b.N; i++ {
						q := services.RecallQuery{View: view, Terms: services.RecallTerms(class.queries[i%len(class.queries)]), Limit: 10}
						t0 := time.Now()
						hits, err := s.SearchRecall(ctx, q)
						if err == nil && len(hits) == 0 && len(q.Terms) > 1 {
							q.AnyTerm = true
							hits, err = s.SearchRecall(ctx, q)
						}
						lat = append(lat, time.Since(t0))
						if err != nil {
							b.Fatal(err)
						}
						for _, h := range hits {
							if h.ContextScope != "main" {
								b.Fatalf("main recalled a row of %s", h.ContextScope)
							}
						}
					}
					sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
					b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
				})
			}
		})
	}
}
