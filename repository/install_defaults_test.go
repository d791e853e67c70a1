package repository_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
)

// TestContextDefaultByDatabase: a database this version creates runs the
// scoped mode by default; one upgraded with conversations from before
// scopes keeps the legacy mode; the decision does not change afterwards.
func TestContextDefaultByDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	decide := func(t *testing.T, withLegacyRows bool) (*repository.Store, *pgxpool.Pool, string) {
		pool, _ := dbtest.EmptySchema(t)
		m, err := repository.NewMigrator(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.UpTo(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if withLegacyRows {
			dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'telegram', 'hello')`)
		}
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		store := repository.New(pool)
		mode, err := store.ContextDefault(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return store, pool, mode
	}
	t.Run("created", func(t *testing.T) {
		store, pool, mode := decide(t, false)
		if mode != "scoped" {
			t.Fatalf("new database: %q, want scoped", mode)
		}
		// Conversations written since do not turn it legacy.
		if _, err := pool.Exec(ctx, `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'web', 'hi')`); err != nil {
			t.Fatal(err)
		}
		if again, err := store.ContextDefault(ctx); err != nil || again != "scoped" {
			t.Fatalf("after a message: %q %v, want scoped", again, err)
		}
	})
	t.Run("upgraded", func(t *testing.T) {
		_, _, mode := decide(t, true)
		if mode != "legacy" {
			t.Fatalf("upgraded database with legacy rows: %q, want legacy", mode)
		}
	})
}
