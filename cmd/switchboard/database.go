package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/localpg"
)

// resolveDatabase returns the database URL to use. With DATABASE_URL unset it
// tries the default local server, then starts a private cluster under
// DATA_DIR/postgres; stop (never nil) stops a cluster this process started.
func resolveDatabase(ctx context.Context, cfg *Config, log *slog.Logger) (url string, stop func(), err error) {
	noop := func() {}
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, noop, nil
	}
	if localpg.Reachable(ctx, localpg.DefaultServerURL, 2*time.Second) {
		url, err := localpg.EnsureDatabase(ctx, localpg.DefaultServerURL, "switchboard")
		if err != nil {
			return "", noop, err
		}
		log.Info("DATABASE_URL unset: using the local PostgreSQL server", "database_url", url)
		return url, noop, nil
	}
	dir, port := cfg.LocalPGOptions()
	log.Info("DATABASE_URL unset and no server on 127.0.0.1:5432: starting a private PostgreSQL cluster", "data_dir", dir, "port", port)
	cluster, err := localpg.Start(ctx, dir, port)
	if err != nil {
		return "", noop, fmt.Errorf("no DATABASE_URL, no server on 127.0.0.1:5432, and a private cluster could not start: %w", err)
	}
	stop = func() {
		if err := cluster.Stop(); err != nil {
			log.Warn("stop private PostgreSQL cluster", "err", err)
		}
	}
	url, err = localpg.EnsureDatabase(ctx, cluster.URL("postgres"), "switchboard")
	if err != nil {
		stop()
		return "", noop, err
	}
	log.Info("private PostgreSQL cluster running", "data_dir", dir, "database_url", url)
	return url, stop, nil
}

// openDatabase resolves the database (see resolveDatabase), opens a pool and,
// with migrate, applies pending migrations. close releases everything.
func openDatabase(ctx context.Context, cfg *Config, log *slog.Logger, migrate bool) (pool *pgxpool.Pool, close func(), err error) {
	url, stopDB, err := resolveDatabase(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	pool, err = repository.Open(ctx, url)
	if err != nil {
		stopDB()
		return nil, nil, err
	}
	close = func() { pool.Close(); stopDB() }
	if migrate {
		m, err := repository.NewMigrator(pool)
		if err != nil {
			close()
			return nil, nil, err
		}
		defer m.Close()
		if _, err := m.Up(ctx); err != nil {
			close()
			return nil, nil, err
		}
	}
	return pool, close, nil
}
