package localpg

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStartPrivateCluster initialises and starts a real cluster from the
// installed binaries (as an unprivileged user when run as root), creates a
// database, restarts on the same data directory, and stops.
func TestStartPrivateCluster(t *testing.T) {
	if _, err := FindBinDir(); err != nil {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	ctx := context.Background()
	parent, err := os.MkdirTemp("", "localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(parent)
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	// Parents that do not exist yet (a fresh DATA_DIR) are created so the
	// unprivileged user can reach the cluster.
	dir := filepath.Join(parent, "fresh", "datadir", "postgres")
	c, err := Start(ctx, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	url, err := EnsureDatabase(ctx, c.URL("postgres"), "switchboard")
	if err != nil {
		t.Fatal(err)
	}
	// Idempotent.
	if _, err := EnsureDatabase(ctx, c.URL("postgres"), "switchboard"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	// The private cluster is durable: a committed message survives a power
	// cut (fsync, synchronous commit and full-page writes on).
	for _, setting := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "on" {
			t.Errorf("SHOW %s = %q on the private cluster; want on", setting, v)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if Reachable(ctx, url, time.Second) {
		t.Fatal("cluster still answers after Stop")
	}
	// Restart on the same directory keeps data.
	c2, err := Start(ctx, dir, c.Port)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 7 {
		t.Fatalf("data lost across restart: %d %v", v, err)
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("postgres://u:secret@h/db"); got != "postgres://u:xxxxx@h/db" {
		t.Fatalf("Redact = %q", got)
	}
	if got := Redact("postgres://u@h/db"); got != "postgres://u@h/db" {
		t.Fatalf("Redact = %q", got)
	}
}
