package dbtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The suite's connection budget. scripts/test.sh runs several test
// binaries at once and sets TEST_DB_BUDGET to the connections they may
// hold together, TEST_DB_BUDGET_DIR to a directory they share. A test's
// first use of the database (URL, and so Schema, apptest.Start,
// servetest.FreshDB) then waits until its package's share per test
// (SetTestConns) fits beside what the running tests of every binary hold,
// and gives it back when the test ends. Unset, tests do not wait. A
// parallel test calls t.Parallel before it first uses the database: a test
// paused holding its share would keep it from the tests it waits for.
//
// The binaries count holdings under a lock file: a holding is a file
// named after its process (pid.n) holding its size; one whose process has
// died counts for nothing.

var (
	testConns = PoolConns + 1 // a test's pool and a share of the admin and migration connections

	heldMu sync.Mutex
	held   = map[string]*holding{} // by top-level test name
	seq    int
)

type holding struct {
	refs int
	file string
}

// SetTestConns sets how many connections one test of the package may hold
// at once (default PoolConns+1); call it from TestMain before Main. A test
// starting whole instances holds their pools.
func SetTestConns(n int) { testConns = n }

// budget is the suite's connection budget and its directory, zero when the
// suite sets none.
func budget() (int, string) {
	n, err := strconv.Atoi(os.Getenv("TEST_DB_BUDGET"))
	dir := os.Getenv("TEST_DB_BUDGET_DIR")
	if err != nil || n <= 0 || dir == "" {
		return 0, ""
	}
	return n, dir
}

// reserve holds the test's share of the suite's budget until it ends: one
// holding per top-level test, which its subtests share, so a test never
// waits for itself.
func reserve(t testing.TB) {
	limit, dir := budget()
	if limit == 0 {
		return
	}
	key, _, _ := strings.Cut(t.Name(), "/")
	heldMu.Lock()
	h := held[key]
	if h == nil {
		h = &holding{}
		held[key] = h
	}
	h.refs++
	first := h.refs == 1
	heldMu.Unlock()
	t.Cleanup(func() { release(key) })
	if !first {
		return
	}
	file, err := acquire(dir, limit, min(testConns, limit))
	if err != nil {
		t.Fatalf("dbtest: connection budget: %v", err)
	}
	heldMu.Lock()
	h.file = file
	heldMu.Unlock()
}

func release(key string) {
	heldMu.Lock()
	defer heldMu.Unlock()
	h := held[key]
	if h.refs--; h.refs > 0 {
		return
	}
	delete(held, key)
	if h.file != "" {
		_ = os.Remove(h.file)
	}
}

// acquire waits until n fits within limit beside the live holdings in dir
// and records a holding of n, returning its file. It polls every 50 ms: a
// holding ends when a test of another process ends.
func acquire(dir string, limit, n int) (string, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		file, err := tryAcquire(dir, limit, n)
		if file != "" || err != nil {
			return file, err
		}
		<-tick.C
	}
}

func tryAcquire(dir string, limit, n int) (string, error) {
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	used, err := holdings(dir)
	if err != nil {
		return "", err
	}
	if used+n > limit {
		return "", nil
	}
	heldMu.Lock()
	seq++
	file := filepath.Join(dir, fmt.Sprintf("%d.%d", os.Getpid(), seq))
	heldMu.Unlock()
	return file, os.WriteFile(file, []byte(strconv.Itoa(n)), 0o644)
}

// holdings sums the live holdings in dir, removing those of processes
// that died.
func holdings(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	sum := 0
	for _, e := range entries {
		pid, _, ok := strings.Cut(e.Name(), ".")
		p, err := strconv.Atoi(pid)
		if !ok || err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if syscall.Kill(p, 0) == syscall.ESRCH {
			_ = os.Remove(path)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue // removed meanwhile
		}
		n, _ := strconv.Atoi(string(b))
		sum += n
	}
	return sum, nil
}
