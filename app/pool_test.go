package app

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
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
	if n := ServePoolSize(16); n < 2*16 {
		t.Fatalf("pool of %d for 16 workers: each needs two connections", n)
	}
}

// TestNewReportsAnErrorInsteadOfPanicking: when building fails (here the
// database does not answer), New closes what it built and returns the
// error; it used to close a nil App and panic, so a serve that lost a race
// or a database at start crashed with a stack trace instead of saying why.
func TestNewReportsAnErrorInsteadOfPanicking(t *testing.T) {
	t.Parallel()
	a, err := New(context.Background(), Options{DatabaseURL: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"})
	if err == nil || a != nil {
		t.Fatalf("New on an unreachable database: %v, %v; want an error and no App", a, err)
	}
	if !strings.Contains(err.Error(), "connect") && !strings.Contains(err.Error(), "ping") {
		t.Fatalf("error does not say the database could not be reached: %v", err)
	}
}
