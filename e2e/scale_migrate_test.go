package e2e

import (
	"context"
	"encoding/json"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/migrations"
	"github.com/switchboard/switchboard/repository/dbtest"
)

// TestThreeInstancesStartTogetherOnAnEmptyDatabase starts three real
// `switchboard serve` processes at the same moment on an empty schema:
// every one of them serves (its /readyz says 200), each migration is
// applied exactly once (by one instance, recorded once in goose's table),
// and no instance logs an error.
func TestThreeInstancesStartTogetherOnAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	// Three processes migrating at once hold more than one test's share
	// (servetest.ProcessConns): 4 to 17 measured (the budget's peaks file).
	dbtest.Reserve(t, 3*6)
	db := freshDB(t)
	const token = "migrate-race-token-0123456789"

	procs := make([]*serveProc, 3)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done() // startProc's t.Fatal ends this goroutine (the test fails)
			<-start
			procs[i] = startProc(t, bin, db, "WEB_AUTH_TOKEN="+token)
		}()
	}
	close(start)
	wg.Wait()
	for i, p := range procs {
		if p == nil {
			t.Fatalf("instance %d did not start", i)
		}
	}

	want := migrationVersions(t)
	applied := map[int64]int{}
	for i, p := range procs {
		if got := getStatus(t, p.URL+"/readyz"); got != 200 {
			t.Errorf("instance %d: /readyz %d", i, got)
		}
		for _, line := range strings.Split(p.Stderr.String(), "\n") {
			var rec struct {
				Level    string  `json:"level"`
				Msg      string  `json:"msg"`
				Versions []int64 `json:"versions"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			if rec.Level == "ERROR" {
				t.Errorf("instance %d logged an error: %s", i, line)
			}
			if rec.Msg == "migrations applied" {
				for _, v := range rec.Versions {
					applied[v]++
				}
			}
		}
	}
	for _, v := range want {
		if applied[v] != 1 {
			t.Errorf("migration %d applied by %d instances; want exactly one", v, applied[v])
		}
	}
	pool := dbtest.PoolFor(t, db)
	rows, err := pool.Query(context.Background(),
		`SELECT version_id, count(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id HAVING count(*) > 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v, n int64
		_ = rows.Scan(&v, &n)
		t.Errorf("goose_db_version records migration %d %d times", v, n)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("goose_db_version holds %d versions; want %d", n, len(want))
	}
}

// migrationVersions lists the embedded migrations' versions (the number
// each file name starts with).
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded migrations: %v", err)
	}
	var out []int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration file %s: %v", n, err)
		}
		out = append(out, v)
	}
	return out
}
