package repository_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
)

// TestPhase1UpgradeKeepsLegacyRows applies the legacy schema, writes rows the
// way the legacy code did, applies Phase 1, and checks that old readers see
// the same thing and the new columns took their defaults.
func TestPhase1UpgradeKeepsLegacyRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.EmptySchema(t)
	m, err := repository.NewMigrator(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'telegram', 'hello'), ('assistant', 'agent', 'hi there')`)
	dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content, visible) VALUES ('tool', 'agent', 'raw step', 0)`)
	dbtest.Exec(t, pool, `INSERT INTO chat_context_summaries (scope, until_message_id, summary_text) VALUES ('global', 2, 'they greeted')`)
	dbtest.Exec(t, pool, `INSERT INTO agent_runs (source, status, model, prompt_token_budget, estimated_prompt_tokens, model_context_window) VALUES ('telegram', 'ok', 'm', 1000, 200, 8000)`)
	dbtest.Exec(t, pool, `INSERT INTO agent_run_steps (run_id, step_index, kind) VALUES (1, 0, 'model_call')`)

	legacyRead := func() string {
		var out strings.Builder
		rows, err := pool.Query(ctx, `SELECT id, role, source, content, visible FROM chat_messages ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, _ := rows.Values()
			for _, v := range vals {
				out.WriteString(strings.TrimSpace(strings.ReplaceAll(fmtAny(v), "\n", " ")) + "|")
			}
		}
		rows.Close()
		var until int64
		var text string
		if err := pool.QueryRow(ctx, `SELECT until_message_id, summary_text FROM chat_context_summaries WHERE scope = 'global'`).Scan(&until, &text); err != nil {
			t.Fatal(err)
		}
		out.WriteString(fmtAny(until) + text)
		return out.String()
	}
	before := legacyRead()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if after := legacyRead(); after != before {
		t.Fatalf("legacy read changed:\nbefore %s\nafter  %s", before, after)
	}
	var bad int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM chat_messages WHERE timeline_scope <> 'global' OR context_scope <> 'main' OR agent_id IS NOT NULL`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("message defaults not filled: %d rows off, err %v", bad, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM agent_runs WHERE context_scope <> 'main' OR parent_run_id IS NOT NULL OR agent_id IS NOT NULL`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("run defaults not filled: %d rows off, err %v", bad, err)
	}
	var tl string
	if err := pool.QueryRow(ctx, `SELECT timeline_scope FROM chat_context_summaries WHERE scope = 'global'`).Scan(&tl); err != nil || tl != "global" {
		t.Fatalf("summary timeline default: %q %v", tl, err)
	}
	// The three indexes exist with the seed's names.
	for _, idx := range []string{"idx_chat_messages_context_scope_id", "idx_chat_messages_timeline_scope_id", "idx_agent_runs_context_scope_started_at"} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname = $1 AND schemaname = current_schema()`, idx).Scan(&n); err != nil || n != 1 {
			t.Fatalf("index %s: %d %v", idx, n, err)
		}
	}
	// Down and up again round-trips.
	for i := 0; i < 2; i++ {
		if _, err := m.Down(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if pending, err := m.Pending(ctx); err != nil || pending {
		t.Fatalf("pending after up: %v %v", pending, err)
	}
}

// TestInspectionQueriesRunVerbatim runs every statement of repository/inspect.sql
// against a migrated, populated schema.
func TestInspectionQueriesRunVerbatim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'web', 'hello')`)
	dbtest.Exec(t, pool, `INSERT INTO chat_context_summaries (scope, until_message_id, summary_text) VALUES ('main', 1, 'x')`)
	dbtest.Exec(t, pool, `INSERT INTO agent_runs (source, status) VALUES ('web', 'ok')`)
	raw, err := os.ReadFile("inspect.sql")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, stmt := range strings.Split(string(raw), ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		rows, err := pool.Query(ctx, stmt)
		if err != nil {
			t.Fatalf("query failed: %v\n%s", err, stmt)
		}
		got := 0
		for rows.Next() {
			got++
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("query failed: %v\n%s", err, stmt)
		}
		rows.Close()
		if got == 0 {
			t.Fatalf("query returned no rows on a populated schema:\n%s", stmt)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("ran %d queries, want at least the appendix's 3", n)
	}
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func fmtAny(v any) string { return fmt.Sprint(v) }

// TestConcurrentMigratorsApplyEachMigrationOnce: eight migrators on their
// own pools (as eight instances) run Up at once on an empty schema; the
// advisory lock lets one apply everything and the others find nothing
// pending, with no error. (Without the lock eight fail at once on
// duplicate objects; four once did not.)
func TestConcurrentMigratorsApplyEachMigrationOnce(t *testing.T) {
	t.Parallel()
	const n = 8
	// Each migrator holds a connection for the lock (waiting for it, or
	// holding it) and the one migrating uses up to two more for goose's
	// statements (database/sql keeps two idle): n+2 at once, each
	// migrator closing its pool when done (with every pool open to the
	// end the test held 9, over the package's share of 5).
	dbtest.Reserve(t, n+2)
	ctx := context.Background()
	_, schema := dbtest.EmptySchema(t)
	url := dbtest.SchemaURL(dbtest.URL(t), schema)
	applied := make([][]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		pool := dbtest.PoolFor(t, url)
		m, err := repository.NewMigrator(pool)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			applied[i], errs[i] = m.Up(ctx)
			_ = m.Close()
			pool.Close()
		}()
	}
	close(start)
	wg.Wait()
	total := map[int64]int{}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Errorf("migrator %d: %v", i, errs[i])
		}
		for _, v := range applied[i] {
			total[v]++
		}
	}
	if len(total) == 0 {
		t.Fatal("no migration applied")
	}
	for v, k := range total {
		if k != 1 {
			t.Errorf("migration %d applied %d times", v, k)
		}
	}
}
