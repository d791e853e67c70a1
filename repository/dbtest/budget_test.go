package dbtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/internal/polltest"
)

// TestBudgetHoldingsFitTheLimit: a holding that does not fit beside the
// live ones waits; one whose process died counts for nothing.
func TestBudgetHoldingsFitTheLimit(t *testing.T) {
	dir := t.TempDir()
	first, err := tryAcquire(dir, 10, 6, "")
	if err != nil || first == "" {
		t.Fatalf("6 of 10 free: %q %v", first, err)
	}
	if f, err := tryAcquire(dir, 10, 6, ""); f != "" || err != nil {
		t.Fatalf("6 more of 10 with 6 held: given (%q %v)", f, err)
	}
	if f, err := tryAcquire(dir, 10, 4, ""); f == "" || err != nil {
		t.Fatalf("4 more of 10 with 6 held: %q %v", f, err)
	}
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	// A pid above Linux's pid_max (2^22) belongs to no process.
	dead := filepath.Join(dir, "99999999.1")
	if err := os.WriteFile(dead, []byte("6"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := tryAcquire(dir, 10, 6, ""); f == "" || err != nil {
		t.Fatalf("6 of 10 with 4 held and a dead process's 6: %q %v", f, err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the dead process's holding is still there (%v)", err)
	}
}

// TestBudgetSubtestsShareTheirTestsHolding: a subtest holds nothing more
// than its test (it would wait for its parent forever), and the test's
// share is given back when it ends.
func TestBudgetSubtestsShareTheirTestsHolding(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TEST_DB_BUDGET", "5")
	t.Setenv("TEST_DB_BUDGET_DIR", dir)
	prev := testConns
	SetTestConns(5)
	t.Cleanup(func() { SetTestConns(prev) })
	t.Run("test", func(t *testing.T) {
		reserve(t)
		t.Run("sub", func(t *testing.T) {
			reserve(t)
			if n, _ := holdings(dir); n != 5 {
				t.Fatalf("held %d, want the test's 5", n)
			}
		})
		if n, _ := holdings(dir); n != 5 {
			t.Fatalf("held %d after the subtest, want the test's 5", n)
		}
	})
	if n, _ := holdings(dir); n != 0 {
		t.Fatalf("held %d after the test ended", n)
	}
}

// TestBudgetCountsWhatATestHolds: a test holding more connections than
// its share has its holding raised to what it holds (counted in
// pg_stat_activity by its application_name), and its peak is recorded
// when it ends.
func TestBudgetCountsWhatATestHolds(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TEST_DB_BUDGET", "20")
	t.Setenv("TEST_DB_BUDGET_DIR", dir)
	prev := testConns
	SetTestConns(1)
	t.Cleanup(func() { SetTestConns(prev) })
	t.Run("test", func(t *testing.T) {
		pool, _ := Schema(t)
		var conns []*pgxpool.Conn
		for range PoolConns {
			c, err := pool.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		defer func() {
			for _, c := range conns {
				c.Release()
			}
		}()
		if !polltest.Every(10*time.Second, 50*time.Millisecond, func() bool {
			n, _ := holdings(dir)
			return n >= PoolConns
		}) {
			n, _ := holdings(dir)
			t.Fatalf("held %d while the test holds %d connections on a share of 1", n, PoolConns)
		}
	})
	if n, _ := holdings(dir); n != 0 {
		t.Fatalf("held %d after the test ended", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, "peaks"))
	if err != nil {
		t.Fatal(err)
	}
	var bin, test string
	var peak, share int
	if _, err := fmt.Sscan(string(b), &bin, &test, &peak, &share); err != nil || test != t.Name() || peak < PoolConns || share != 1 {
		t.Fatalf("peaks file %q (%v); want %s's peak of at least %d against a share of 1", b, err, t.Name(), PoolConns)
	}
}

// TestBudgetLetsWaitersInInOrder: a share that would fit beside the
// holdings waits while a waiter that came first still needs room; the one
// that came first is not held back by later ones.
func TestBudgetLetsWaitersInInOrder(t *testing.T) {
	dir := t.TempDir()
	if f, err := tryAcquire(dir, 10, 6, ""); f == "" || err != nil {
		t.Fatalf("6 of 10 free: %q %v", f, err)
	}
	first := filepath.Join(dir, fmt.Sprintf("w.%d.1", os.Getpid()))
	later := filepath.Join(dir, fmt.Sprintf("w.%d.2", os.Getpid()))
	if err := os.WriteFile(first, []byte("100 6"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(later, []byte("200 4"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := tryAcquire(dir, 10, 4, later); f != "" || err != nil {
		t.Fatalf("4 with 6 held and a waiter for 6 ahead: given (%q %v)", f, err)
	}
	if f, err := tryAcquire(dir, 10, 4, first); f == "" || err != nil {
		t.Fatalf("4 for the first waiter with 6 held: %q %v", f, err)
	}
}
