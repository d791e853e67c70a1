package prompt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// The history cache answers every backward page exactly as the database
// does, while rows keep arriving (in this timeline and others, visible
// and hidden, in other scopes), the summary cursor moves and entries are
// trimmed; after a lost row (a failover to a standby that lacked it) it
// starts over instead of serving rows that are gone; builds that stop
// early let the entry drop what they no longer read.
func TestHistoryCachePagesAsTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	s := repository.New(pool)
	rng := rand.New(rand.NewPCG(1, 2))
	insert := func(timeline, scope string, visible bool, size int) {
		t.Helper()
		if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: timeline, ContextScope: scope, Role: services.RoleUser,
			Source: services.SourceWeb, Content: fmt.Sprintf("%0*d", size, rng.IntN(1000)), Visible: visible}); err != nil {
			t.Fatal(err)
		}
	}
	var c historyCache
	const newest = 1<<63 - 1
	keys := []services.ContextQuery{
		{TimelineScope: "tl", ByTimelineOnly: true},
		{TimelineScope: "tl", ContextScope: "main"},
		{TimelineScope: "tl", ContextScope: "sub:a"},
	}
	cursor := int64(0)
	for round := range 120 {
		for range rng.IntN(6) {
			scope := []string{"main", "main", "sub:a"}[rng.IntN(3)]
			insert([]string{"tl", "tl", "other"}[rng.IntN(3)], scope, scope == "main" && rng.IntN(4) > 0, 10+rng.IntN(3000))
		}
		if round%30 == 29 {
			// A lost row: the newest row of the timeline disappears.
			if _, err := pool.Exec(ctx, `DELETE FROM chat_messages WHERE id = (SELECT max(id) FROM chat_messages WHERE timeline_scope = 'tl')`); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(10) == 0 {
			cursor += int64(rng.IntN(8)) // compaction moves the cursor
		}
		for _, k := range keys {
			q := k
			q.AfterID, q.BeforeID, q.Limit = cursor, newest, 1+rng.IntN(60)
			for page := 0; ; page++ {
				got, err := c.page(ctx, s, q)
				if err != nil {
					t.Fatal(err)
				}
				want, err := s.ListContext(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if !sameIDs(got, want) || (len(got) > 0 && !reflect.DeepEqual(got[len(got)-1], want[len(want)-1])) {
					t.Fatalf("round %d, %+v page %d: cache %v, database %v", round, q, page, ids(got), ids(want))
				}
				// A build stops once its working set is full: often
				// before the conversation's first row.
				if len(want) < q.Limit || rng.IntN(3) == 0 {
					break
				}
				q.BeforeID = want[0].ID
			}
		}
	}
	for _, e := range c.entries {
		if e.bytes > historyBytes {
			t.Fatalf("an entry holds %d bytes, bound %d", e.bytes, historyBytes)
		}
	}
}

func ids(ms []services.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func sameIDs(a, b []services.Message) bool { return reflect.DeepEqual(ids(a), ids(b)) }

// An entry keeps the rows its recent builds read, not every row a build
// once read: after a build that read the whole conversation, builds that
// stop at the working set (here two pages of 50) let the older rows go
// within historyNeedBuilds builds, and a build that reaches back again
// still gets what the database holds.
func TestHistoryCacheKeepsWhatRecentBuildsRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	s := repository.New(pool)
	insert := func(n int) {
		t.Helper()
		for i := range n {
			if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "tl", ContextScope: "main", Role: services.RoleUser,
				Source: services.SourceWeb, Content: fmt.Sprintf("message %d", i), Visible: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var c historyCache
	const newest = 1<<63 - 1
	// build reads pages of 50 from the newest back, at most pages of them,
	// checking each against the database; it returns the rows it read.
	build := func(pages int) int {
		t.Helper()
		q := services.ContextQuery{TimelineScope: "tl", ContextScope: "main", BeforeID: newest, Limit: 50}
		read := 0
		for range pages {
			got, err := c.page(ctx, s, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.ListContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !sameIDs(got, want) {
				t.Fatalf("%+v: cache %v, database %v", q, ids(got), ids(want))
			}
			read += len(got)
			if len(want) < q.Limit {
				break
			}
			q.BeforeID = want[0].ID
		}
		return read
	}
	held := func() int {
		for _, e := range c.entries {
			return len(e.rows)
		}
		return 0
	}
	insert(600)
	if n := build(100); n != 600 || held() != 600 {
		t.Fatalf("a build of the whole conversation read %d rows, the entry holds %d; want 600 and 600", n, held())
	}
	for range 2 * historyNeedBuilds {
		insert(2)
		build(2)
	}
	// The last historyNeedBuilds builds read 100 rows each, 2 more every
	// build: what is kept is those and one build's worth of new rows.
	if h, most := held(), 100+2*(historyNeedBuilds+1); h > most {
		t.Fatalf("after %d builds of 100 rows the entry holds %d rows, want at most %d", 2*historyNeedBuilds, h, most)
	}
	if n := build(100); n != 632 || held() != 632 {
		t.Fatalf("a build of the whole conversation again read %d rows, the entry holds %d; want 632 and 632", n, held())
	}
}
