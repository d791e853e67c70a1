package app

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/repository/queue"
)

func TestWithPoolSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://u@h:5432/db", "postgres://u@h:5432/db?pool_max_conns=42"},
		{"postgresql://u@h/db?sslmode=disable", "postgresql://u@h/db?sslmode=disable&pool_max_conns=42"},
		{"host=h dbname=db", "host=h dbname=db pool_max_conns=42"},
		{"postgres://u@h/db?pool_max_conns=7", "postgres://u@h/db?pool_max_conns=7"},
	} {
		got := WithPoolSize(c.in, 42)
		if got != c.want {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
		cfg, err := pgxpool.ParseConfig(got)
		if err != nil {
			t.Fatalf("%q: %v", got, err)
		}
		if want := int32(42); c.in != "postgres://u@h/db?pool_max_conns=7" && cfg.MaxConns != want {
			t.Errorf("%q: MaxConns %d", got, cfg.MaxConns)
		}
	}
	if n := ServePoolSize(PoolNeeds{TurnWorkers: 16}); n < 2*16 {
		t.Fatalf("pool of %d for 16 workers: each needs two connections", n)
	}
}

// TestPoolSizedFromWhatRuns: an instance with AGENT_WORKERS=2 and no
// Telegram used to size its pool at 42 connections (room for 8 outbound
// lanes nobody delivers on); the outbound lanes count only when a channel
// delivers, an instance answering no turns counts no turn workers, and each
// lock holder still counts twice (its lock and its queries).
func TestPoolSizedFromWhatRuns(t *testing.T) {
	t.Parallel()
	small := ServePoolSize(PoolNeeds{TurnWorkers: 2})
	if small > 30 {
		t.Fatalf("pool of %d for 2 workers and no deliveries; it used to be 42 and should fit a shared PostgreSQL", small)
	}
	if d := ServePoolSize(PoolNeeds{TurnWorkers: 2, Deliveries: true}) - small; d != 2*queue.OutboundWorkers {
		t.Fatalf("Telegram deliveries add %d connections; want 2 per outbound lane (%d)", d, 2*queue.OutboundWorkers)
	}
	if d := small - ServePoolSize(PoolNeeds{TurnWorkers: -1}); d != 4 {
		t.Fatalf("2 turn workers add %d connections; want 4 (a lock and queries each)", d)
	}
}

// TestPoolLetsIdleConnectionsGo: the pool opens nothing it does not use and
// closes connections idle for repository.MaxConnIdle, so a quiet instance
// holds no connections of a shared PostgreSQL (one server held 23 idle
// connections after a load run).
func TestPoolLetsIdleConnectionsGo(t *testing.T) {
	t.Parallel()
	// One pool, barely used: not the package's share for a test starting
	// instances (apptest.TestConns).
	dbtest.Reserve(t, 2)
	pool, err := repository.Open(context.Background(), dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cfg := pool.Config()
	if cfg.MinConns != 0 || cfg.MaxConnIdleTime != repository.MaxConnIdle || cfg.HealthCheckPeriod > repository.MaxConnIdle {
		t.Fatalf("pool keeps idle connections: MinConns %d, MaxConnIdleTime %s, HealthCheckPeriod %s", cfg.MinConns, cfg.MaxConnIdleTime, cfg.HealthCheckPeriod)
	}
}

// TestNewReportsAnErrorInsteadOfPanicking: when building fails (here the
// database does not answer), New closes what it built and returns the
// error; it used to close a nil App and panic, so a serve that lost a race
// or a database at start crashed with a stack trace instead of saying why.
func TestNewReportsAnErrorInsteadOfPanicking(t *testing.T) {
	t.Parallel()
	a, err := New(context.Background(), Config{DatabaseURL: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"})
	if err == nil || a != nil {
		t.Fatalf("New on an unreachable database: %v, %v; want an error and no App", a, err)
	}
	if !strings.Contains(err.Error(), "connect") && !strings.Contains(err.Error(), "ping") {
		t.Fatalf("error does not say the database could not be reached: %v", err)
	}
}
