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

// Migrator applies the embedded goose migrations.
type Migrator struct {
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
	return &Migrator{db: db, provider: p}, nil
}

// Close releases the migrator's handle.
func (m *Migrator) Close() error { return m.db.Close() }

// Up applies every pending migration and returns the versions applied.
func (m *Migrator) Up(ctx context.Context) ([]int64, error) {
	res, err := m.provider.Up(ctx)
	return versions(res), wrapMigrate("up", err)
}

// UpTo applies pending migrations up to and including version.
func (m *Migrator) UpTo(ctx context.Context, version int64) ([]int64, error) {
	res, err := m.provider.UpTo(ctx, version)
	return versions(res), wrapMigrate("up-to", err)
}

// Down rolls back the latest migration.
func (m *Migrator) Down(ctx context.Context) (int64, error) {
	res, err := m.provider.Down(ctx)
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
