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
// died counts for nothing. Tests are let in in the order they began to
// wait (acquire), so a large share is not passed over by smaller ones.
//
// A share is checked against what the test really holds: every connection
// a test opens, and those of the processes it starts on a URL it was
// given, carry its name (application_name "pkg.test pid TestName",
// withAppName), and while tests hold shares each binary counts its tests'
// connections in pg_stat_activity every 250 ms (sample). A test found
// holding more than its share has its holding raised to what it holds, so
// the other tests wait for it; when it ends its peak and share are
// appended to the directory's "peaks" file, which scripts/test.sh sums up.

var (
	testConns = PoolConns + 1 // a test's pool and a share of the admin and migration connections

	heldMu sync.Mutex
	held   = map[string]*holding{} // by top-level test name
	seq    int
)

type holding struct {
	refs  int
	file  string
	share int // connections reserved when the test began
	size  int // connections the holding file says
	peak  int // most connections seen held by the test at once
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

// Reserve holds n connections of the suite's budget for t's top-level test
// instead of its package's share (SetTestConns), for a test that holds
// more by design (say two service processes with pools of 10). Call it
// before the test first uses the database; later it changes nothing.
func Reserve(t testing.TB, n int) {
	t.Helper()
	reserveN(t, n)
}

// reserve holds the test's share of the suite's budget until it ends: one
// holding per top-level test, which its subtests share, so a test never
// waits for itself.
func reserve(t testing.TB) { reserveN(t, testConns) }

func reserveN(t testing.TB, conns int) {
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
	n := min(conns, limit)
	file, err := acquire(dir, limit, n)
	if err != nil {
		t.Fatalf("dbtest: connection budget: %v", err)
	}
	heldMu.Lock()
	h.file, h.share, h.size = file, n, n
	heldMu.Unlock()
	samplerOnce.Do(func() { go sample() })
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
		if h.peak > 0 {
			recordPeak(filepath.Dir(h.file), key, h.peak, h.share)
		}
	}
}

// recordPeak appends "binary test peak share" to dir's peaks file.
func recordPeak(dir, test string, peak, share int) {
	f, err := os.OpenFile(filepath.Join(dir, "peaks"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = fmt.Fprintf(f, "%s %s %d %d\n", filepath.Base(os.Args[0]), test, peak, share)
}

var samplerOnce sync.Once

// sampleEvery is how often a binary counts its tests' connections.
const sampleEvery = 250 * time.Millisecond

// sample counts, while the binary's tests hold shares, the connections
// each holds (by application_name, on the package's admin connection),
// keeps each test's peak, and raises a holding to what its test holds when
// that is more than its share.
func sample() {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for range tick.C {
		heldMu.Lock()
		busy := len(held) > 0
		heldMu.Unlock()
		mu.Lock()
		pool := admin
		mu.Unlock()
		if !busy || pool == nil {
			continue
		}
		counts, err := connsByTest(pool)
		if err != nil {
			continue
		}
		var grow []*holding
		heldMu.Lock()
		for key, h := range held {
			n := counts[appName(key)]
			h.peak = max(h.peak, n)
			if n > h.size && h.file != "" {
				grow = append(grow, h)
			}
		}
		heldMu.Unlock()
		for _, h := range grow {
			raise(h)
		}
	}
}

// raise rewrites h's holding to the connections its test holds.
func raise(h *holding) {
	heldMu.Lock()
	file := h.file
	heldMu.Unlock()
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(file), "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX) != nil {
		return
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	heldMu.Lock()
	defer heldMu.Unlock()
	if h.refs == 0 || h.file == "" {
		return // ended meanwhile
	}
	h.size = max(h.size, h.peak)
	_ = os.WriteFile(h.file, []byte(strconv.Itoa(h.size)), 0o644)
}

// acquire waits until n fits within limit beside the live holdings in dir
// and records a holding of n, returning its file. It polls every 50 ms: a
// holding ends when a test of another process ends. Tests are let in in
// the order they began to wait: a waiter is recorded as a file (w.pid.n:
// when it began, and its n), and n fits only beside the holdings and the
// needs of the live waiters that came before it, so a test needing a large
// share is not passed over for ever by smaller ones.
func acquire(dir string, limit, n int) (string, error) {
	heldMu.Lock()
	seq++
	me := filepath.Join(dir, fmt.Sprintf("w.%d.%d", os.Getpid(), seq))
	heldMu.Unlock()
	if err := os.WriteFile(me, fmt.Appendf(nil, "%d %d", time.Now().UnixNano(), n), 0o644); err != nil {
		return "", err
	}
	defer os.Remove(me)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		file, err := tryAcquire(dir, limit, n, me)
		if file != "" || err != nil {
			return file, err
		}
		<-tick.C
	}
}

// tryAcquire records a holding of n when it fits within limit beside the
// live holdings and the waiters ahead of me (the caller's waiter file; ""
// when it has none: every waiter is ahead).
func tryAcquire(dir string, limit, n int, me string) (string, error) {
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
	if used+waitingAhead(dir, me)+n > limit {
		return "", nil
	}
	heldMu.Lock()
	seq++
	file := filepath.Join(dir, fmt.Sprintf("%d.%d", os.Getpid(), seq))
	heldMu.Unlock()
	return file, os.WriteFile(file, []byte(strconv.Itoa(n)), 0o644)
}

// waitingAhead sums the needs of the live waiters in dir that began to
// wait before me, removing those of processes that died.
func waitingAhead(dir, me string) int {
	var mine int64 = -1
	if me != "" {
		if b, err := os.ReadFile(me); err == nil {
			_, _ = fmt.Sscan(string(b), &mine)
		}
	}
	sum := 0
	_ = liveFiles(dir, "w.", func(path string, b []byte) {
		var since int64
		var need int
		if path == me {
			return
		}
		if _, err := fmt.Sscan(string(b), &since, &need); err != nil {
			return
		}
		if mine < 0 || since < mine || (since == mine && path < me) {
			sum += need
		}
	})
	return sum
}

// holdings sums the live holdings in dir, removing those of processes
// that died.
func holdings(dir string) (int, error) {
	sum := 0
	err := liveFiles(dir, "", func(_ string, b []byte) {
		n, _ := strconv.Atoi(string(b))
		sum += n
	})
	return sum, err
}

// liveFiles calls f with the path and content of each file in dir named
// prefix+"pid.n" whose process is alive, removing those of processes that
// died (a file removed meanwhile is passed over).
func liveFiles(dir, prefix string, f func(path string, b []byte)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		pid, _, dotted := strings.Cut(rest, ".")
		p, err := strconv.Atoi(pid)
		if !ok || !dotted || err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if syscall.Kill(p, 0) == syscall.ESRCH {
			_ = os.Remove(path)
			continue
		}
		if b, err := os.ReadFile(path); err == nil {
			f(path, b)
		}
	}
	return nil
}
