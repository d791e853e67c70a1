package repository

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/switchboard/switchboard/migrations"
)

// Migrator applies the embedded goose migrations. Up, UpTo and Down run
// under a PostgreSQL advisory lock, so any number of instances may start
// (and migrate) at once: one applies what is pending while the others wait,
// then find nothing left to do.
type Migrator struct {
	pool     *pgxpool.Pool
	db       *sql.DB
	provider *goose.Provider
}

// NewMigrator returns a Migrator on the pool's database (and search_path).
// Close releases its database/sql handle, not the pool.
func NewMigrator(pool *pgxpool.Pool) (*Migrator, error) {
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return &Migrator{pool: pool, db: db, provider: p}, nil
}

// Close releases the migrator's handle.
func (m *Migrator) Close() error { return m.db.Close() }

// Up applies every pending migration and returns the versions applied.
func (m *Migrator) Up(ctx context.Context) ([]int64, error) {
	var res []*goose.MigrationResult
	err := m.locked(ctx, func() (err error) { res, err = m.provider.Up(ctx); return err })
	return versions(res), wrapMigrate("up", err)
}

// UpTo applies pending migrations up to and including version.
func (m *Migrator) UpTo(ctx context.Context, version int64) ([]int64, error) {
	var res []*goose.MigrationResult
	err := m.locked(ctx, func() (err error) { res, err = m.provider.UpTo(ctx, version); return err })
	return versions(res), wrapMigrate("up-to", err)
}

// Down rolls back the latest migration.
func (m *Migrator) Down(ctx context.Context) (int64, error) {
	var res *goose.MigrationResult
	err := m.locked(ctx, func() (err error) { res, err = m.provider.Down(ctx); return err })
	if err != nil {
		return 0, wrapMigrate("down", err)
	}
	if res == nil {
		return 0, nil
	}
	return res.Source.Version, nil
}

// MigrationStatus is one migration's state.
type MigrationStatus struct {
	Version int64
	Name    string
	Applied bool
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, wrapMigrate("status", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationStatus{Version: s.Source.Version, Name: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

// Pending reports whether any migration is not applied (for /readyz).
func (m *Migrator) Pending(ctx context.Context) (bool, error) {
	ok, err := m.provider.HasPending(ctx)
	return ok, wrapMigrate("pending", err)
}

// migrateLockKey is the advisory lock's key: one per schema (goose's
// version table lives in the connection's current schema), so instances
// on one schema take turns while other schemas of the database do not wait.
const migrateLockKey = `hashtextextended('switchboard.migrate:' || current_schema(), 0)`

// locked runs fn holding the migration lock: a session-level advisory lock
// on a connection of its own, held for the whole of goose's run (goose's
// statements run on other connections of the pool). pg_advisory_lock waits
// while another instance migrates; if that instance dies, PostgreSQL ends
// its session and the lock with it. The lock needs a session that stays
// one server connection: behind PgBouncer, DATABASE_URL must bypass
// transaction pooling (session mode or the server itself).
func (m *Migrator) locked(ctx context.Context, fn func() error) error {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("lock: acquire a connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+migrateLockKey+`)`); err != nil {
		return fmt.Errorf("lock: wait for other instances' migrations: %w", err)
	}
	defer func() {
		// With a broken connection the session, and so the lock, is gone.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+migrateLockKey+`)`); err != nil {
			conn.Conn().PgConn().Close(context.WithoutCancel(ctx))
		}
	}()
	return fn()
}

func versions(res []*goose.MigrationResult) []int64 {
	out := make([]int64, 0, len(res))
	for _, r := range res {
		out = append(out, r.Source.Version)
	}
	return out
}

func wrapMigrate(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("migrate %s: %w", op, err)
}
