// Package dbtest gives tests a real, isolated PostgreSQL: TEST_DATABASE_URL
// when set, else a server answering on 127.0.0.1:5432, else a throwaway
// cluster started from the installed server binaries. Each test gets its own
// schema, migrated to the latest version and dropped at cleanup, so tests can
// commit, LISTEN and NOTIFY without seeing each other.
//
// A package using it calls dbtest.Main from TestMain so that a throwaway
// cluster is stopped when the package's tests end.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/localpg"
)

var (
	once    sync.Once
	baseURL string
	initErr error
	cluster *localpg.Cluster
	tmpDir  string
)

// Main runs the package's tests, stops a throwaway cluster afterwards, and exits.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with its own clean-up.
func Run(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		_ = cluster.Stop()
	}
	if tmpDir != "" {
		_ = os.RemoveAll(tmpDir)
	}
	return code
}

// URL returns the base URL of the test database, starting a cluster if needed.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(func() { baseURL, initErr = resolve() })
	if initErr != nil {
		t.Fatalf("dbtest: no PostgreSQL for tests: %v", initErr)
	}
	return baseURL
}

func resolve() (string, error) {
	ctx := context.Background()
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, nil
	}
	if localpg.Reachable(ctx, localpg.DefaultServerURL, 2*time.Second) {
		return localpg.EnsureDatabase(ctx, localpg.DefaultServerURL, "switchboard_test")
	}
	dir, err := os.MkdirTemp("", "switchboard-testpg-")
	if err != nil {
		return "", err
	}
	tmpDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	c, err := localpg.Start(ctx, dir+"/data", 0)
	if err != nil {
		return "", err
	}
	cluster = c
	return localpg.EnsureDatabase(ctx, c.URL("postgres"), "switchboard_test")
}

// Schema creates a fresh schema, migrates it, and returns its name and a
// pool whose search_path points at it. Both are dropped at cleanup.
func Schema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	pool, schema := EmptySchema(t)
	m, err := repository.NewMigrator(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(context.Background()); err != nil {
		t.Fatalf("dbtest: migrate %s: %v", schema, err)
	}
	return pool, schema
}

// EmptySchema is Schema without migrations (for upgrade tests).
func EmptySchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	base := URL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sbt_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("dbtest: create schema: %v", err)
	}
	admin.Close(ctx)
	pool := PoolFor(t, SchemaURL(base, schema))
	t.Cleanup(func() {
		pool.Close()
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	return pool, schema
}

// SchemaURL returns base with search_path set to schema, for processes
// started by a test (a second server sharing the database).
func SchemaURL(base, schema string) string {
	sep := "?"
	for _, c := range base {
		if c == '?' {
			sep = "&"
		}
	}
	return base + sep + "search_path=" + schema
}

// PoolFor opens a pool on url, closed at cleanup.
func PoolFor(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Store returns a repository.Store on a fresh migrated schema.
func Store(t testing.TB) *repository.Store {
	t.Helper()
	pool, _ := Schema(t)
	return repository.New(pool)
}

// Exec runs SQL on the pool or fails the test.
func Exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("dbtest: %s: %v", sql, err)
	}
}
