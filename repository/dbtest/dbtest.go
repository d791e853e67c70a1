// Package dbtest gives tests a real, isolated PostgreSQL: TEST_DATABASE_URL
// when set, else a server answering on 127.0.0.1:5432, else a throwaway
// cluster started from the installed server binaries.
//
// Each test gets a schema of its own, migrated to the latest version, so
// tests can commit, LISTEN and NOTIFY without seeing each other. Migrating
// is the expensive part (every migration, in its own transaction), so a
// package migrates a schema only when no migrated one is free: a test's
// schema goes back to the package's free list at cleanup, emptied
// (TRUNCATE … RESTART IDENTITY of every table but the migration ledgers),
// and the next test takes it, as River's riverdbtest does. A schema whose
// structure a test changed (a table dropped, a migration rolled back) is
// dropped instead of reused. A package therefore migrates about as many
// schemas as it runs tests at once, instead of one per test.
//
// A package using it calls dbtest.Main from TestMain so that its schemas
// are dropped, and a throwaway cluster stopped, when its tests end.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/localpg"
)

// PoolConns is the size of the pool a test gets on its schema. With the
// suite's connection budget (budget.go) it decides how many tests of
// several packages use PostgreSQL at once within about 30 connections.
const PoolConns = 4

var (
	once    sync.Once
	baseURL string
	initErr error
	cluster *localpg.Cluster
	tmpDir  string

	// The package's migrated schemas: free ones wait in free; all lists
	// every schema this process created (dropped by Run).
	mu          sync.Mutex
	free        []string
	all         []string
	prefix      string
	fingerprint string // of the first migrated schema; a reused one must match it
	admin       *pgxpool.Pool
)

// Main runs the package's tests, drops its schemas, stops a throwaway
// cluster afterwards, and exits.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with its own clean-up.
func Run(m *testing.M) int {
	code := m.Run()
	dropAll()
	if cluster != nil {
		_ = cluster.Stop()
	}
	if tmpDir != "" {
		_ = os.RemoveAll(tmpDir)
	}
	return code
}

func dropAll() {
	mu.Lock()
	defer mu.Unlock()
	if admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range all {
		_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+s+" CASCADE")
	}
	all, free = nil, nil
	admin.Close()
	admin = nil
}

// URL returns the base URL of the test database, starting a cluster if
// needed. Within a suite's connection budget (budget.go) the test first
// waits for its share.
func URL(t testing.TB) string {
	t.Helper()
	reserve(t)
	once.Do(func() { baseURL, initErr = resolveServer() })
	if initErr != nil {
		t.Fatalf("dbtest: no PostgreSQL for tests: %v", initErr)
	}
	return withAppName(baseURL, t.Name())
}

// withAppName names the connections opened on url after the test binary,
// its process and the top-level test (appName), so the suite's use of a
// shared server can be read per package and per test (pg_stat_activity's
// application_name) and the budget can count what a test holds (budget.go):
// the pools of processes a test starts on a URL it was given carry its name
// too.
func withAppName(url, test string) string {
	name := appName(test)
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return repository.WithParam(url, "application_name", neturl.PathEscape(name))
	}
	return repository.WithParam(url, "application_name", "'"+name+"'")
}

// appName is "pkg.test pid TestName" for the top-level test of test ("":
// the binary's own connections), cut to PostgreSQL's 63 bytes.
func appName(test string) string {
	name := fmt.Sprintf("%s %d", filepath.Base(os.Args[0]), os.Getpid())
	if test != "" {
		top, _, _ := strings.Cut(test, "/")
		name += " " + top
	}
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// connsByTest counts the connections of this binary's tests by
// application_name.
func connsByTest(pool *pgxpool.Pool) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT application_name, count(*)::int FROM pg_stat_activity WHERE starts_with(application_name, $1) GROUP BY 1`, appName("")+" ")
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	var name string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&name, &n}, func() error {
		counts[name] = n
		return nil
	})
	return counts, err
}

func resolveServer() (string, error) {
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix = "sbt_" + hex.EncodeToString(b[:]) + "_"
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, openAdmin(ctx, u)
	}
	if localpg.Reachable(ctx, localpg.DefaultServerURL, 2*time.Second) {
		u, err := localpg.EnsureDatabase(ctx, localpg.DefaultServerURL, "switchboard_test")
		if err != nil {
			return "", err
		}
		return u, openAdmin(ctx, u)
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
	u, err := localpg.EnsureDatabase(ctx, c.URL("postgres"), "switchboard_test")
	if err != nil {
		return "", err
	}
	return u, openAdmin(ctx, u)
}

// openAdmin opens the package's one connection for creating, emptying and
// dropping schemas; it is let go when idle.
func openAdmin(ctx context.Context, url string) error {
	cfg, err := pgxpool.ParseConfig(withAppName(url, ""))
	if err != nil {
		return err
	}
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.MaxConnIdleTime = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	// Under mu: the budget's sampler (budget.go) reads admin, and runs
	// already when a test's Reserve came before its first URL.
	mu.Lock()
	admin = pool
	mu.Unlock()
	return nil
}

// Schema gives the test a migrated, empty schema of its own and a pool
// whose search_path points at it. At cleanup the pool is closed and the
// schema emptied for the package's next test.
func Schema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	schema := MigratedSchema(t)
	return PoolFor(t, SchemaURL(URL(t), schema)), schema
}

// MigratedSchema is Schema without a pool, for a test that only hands the
// schema to a server it starts (dbtest.SchemaURL).
func MigratedSchema(t testing.TB) string {
	t.Helper()
	URL(t)
	mu.Lock()
	var schema string
	if n := len(free); n > 0 {
		schema, free = free[n-1], free[:n-1]
	}
	mu.Unlock()
	if schema == "" {
		var err error
		if schema, err = newMigratedSchema(); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	t.Cleanup(func() { giveBack(schema) })
	return schema
}

func newMigratedSchema() (string, error) {
	ctx := context.Background()
	schema, err := createSchema(ctx)
	if err != nil {
		return "", err
	}
	cfg, err := pgxpool.ParseConfig(SchemaURL(withAppName(baseURL, ""), schema))
	if err != nil {
		return "", err
	}
	cfg.MaxConns = 2 // the migrator's lock and its statements
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	m, err := repository.NewMigrator(pool)
	if err != nil {
		return "", err
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		return "", fmt.Errorf("migrate %s: %w", schema, err)
	}
	fp, err := schemaFingerprint(ctx, schema)
	if err != nil {
		return "", err
	}
	mu.Lock()
	defer mu.Unlock()
	if fingerprint == "" {
		fingerprint = fp
	}
	return schema, nil
}

func createSchema(ctx context.Context) (string, error) {
	mu.Lock()
	schema := fmt.Sprintf("%s%d", prefix, len(all))
	all = append(all, schema)
	mu.Unlock()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", fmt.Errorf("create schema: %w", err)
	}
	return schema, nil
}

// giveBack empties schema and puts it on the free list, or drops it when a
// test changed its structure or it cannot be emptied.
func giveBack(schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fp, err := schemaFingerprint(ctx, schema)
	if err == nil && fp == fingerprint {
		err = truncate(ctx, schema)
		if err == nil {
			mu.Lock()
			free = append(free, schema)
			mu.Unlock()
			return
		}
	}
	_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
}

// ledgers are the tables a reused schema keeps: which migrations ran.
var ledgers = map[string]bool{"goose_db_version": true, "river_migration": true}

// truncate empties every table of schema but the ledgers, restarts its
// sequences, and waits at most a few seconds for a lock a leftover session
// holds.
func truncate(ctx context.Context, schema string) error {
	rows, err := admin.Query(ctx, `SELECT c.relname FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace AND c.relkind IN ('r', 'p')`, schema)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var tables []string
	for _, n := range names {
		if !ledgers[n] {
			tables = append(tables, pgx.Identifier{schema, n}.Sanitize())
		}
	}
	if len(tables) == 0 {
		return nil
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(tables, ", ")+" RESTART IDENTITY CASCADE"); err != nil {
		return err
	}
	// Sequences no table owns (RESTART IDENTITY restarts only owned ones).
	if _, err := tx.Exec(ctx, `DO $$DECLARE s record; BEGIN
		FOR s IN SELECT c.oid::regclass AS seq FROM pg_class c WHERE c.relkind = 'S' AND c.relnamespace = '`+schema+`'::regnamespace LOOP
			EXECUTE 'ALTER SEQUENCE ' || s.seq || ' RESTART';
		END LOOP; END$$`); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// schemaFingerprint sums up schema's structure (relations and their
// columns, constraints, functions, triggers, applied migrations), so a
// schema a test altered is not handed to the next one.
func schemaFingerprint(ctx context.Context, schema string) (string, error) {
	var fp string
	err := admin.QueryRow(ctx, fingerprintSQL, schema).Scan(&fp)
	if err != nil {
		return "", err
	}
	var applied string
	err = admin.QueryRow(ctx, `SELECT coalesce(string_agg(version_id::text, ',' ORDER BY version_id), '') FROM `+
		pgx.Identifier{schema, "goose_db_version"}.Sanitize()+` WHERE is_applied`).Scan(&applied)
	if err != nil {
		return "", err
	}
	return fp + "/" + applied, nil
}

const fingerprintSQL = `
WITH ns AS (SELECT $1::text::regnamespace AS oid)
SELECT md5(coalesce(string_agg(replace(d, $1::text || '.', ''), '|' ORDER BY d), '')) FROM (
	SELECT c.relname || '/' || c.relkind::text || '/' || coalesce((
		SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text, ',' ORDER BY a.attnum)
		FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') AS d
	FROM pg_class c, ns WHERE c.relnamespace = ns.oid
	UNION ALL
	SELECT 'con/' || conname || '/' || pg_get_constraintdef(k.oid) FROM pg_constraint k, ns WHERE k.connamespace = ns.oid
	UNION ALL
	SELECT 'fn/' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')/' || md5(p.prosrc) FROM pg_proc p, ns WHERE p.pronamespace = ns.oid
	UNION ALL
	SELECT 'trg/' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid, ns WHERE c.relnamespace = ns.oid AND NOT t.tgisinternal
) s`

// EmptySchema is a fresh schema without migrations (for upgrade tests),
// dropped at cleanup, and a pool on it.
func EmptySchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	URL(t)
	schema, err := createSchema(context.Background())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	pool := PoolFor(t, SchemaURL(URL(t), schema))
	t.Cleanup(func() {
		pool.Close()
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	return pool, schema
}

// SchemaURL returns base with search_path set to schema, for processes
// started by a test (a second server sharing the database).
func SchemaURL(base, schema string) string {
	return repository.WithParam(base, "search_path", schema)
}

// PoolFor opens a pool of PoolConns connections on url, closed at cleanup.
// Idle connections are let go after a second, so a test that waits does
// not hold them.
func PoolFor(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = PoolConns
	}
	cfg.MaxConnIdleTime = time.Second
	cfg.HealthCheckPeriod = time.Second
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
