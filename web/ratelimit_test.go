package web

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiterRefillsAtItsRate(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	l := newLimiter(120, 3, func() time.Time { return now }) // 2 a second
	for i := 0; i < 3; i++ {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("request %d within the burst refused", i+1)
		}
	}
	ok, wait := l.allow("a")
	if ok || wait <= 0 || wait > 500*time.Millisecond {
		t.Fatalf("past the burst: ok=%v wait=%s; want a refusal and ≤ 500ms", ok, wait)
	}
	if ok, _ := l.allow("b"); !ok {
		t.Fatal("another identity shares the bucket")
	}
	now = now.Add(wait)
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("refused after waiting the advised time")
	}
	now = now.Add(time.Hour)
	for i := 0; i < 3; i++ {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("burst after an idle hour: request %d refused", i+1)
		}
	}
	if ok, _ := l.allow("a"); ok {
		t.Fatal("the bucket holds more than its burst after idling")
	}
}

func TestLimiterForgetsIdleIdentities(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	l := newLimiter(60, 5, func() time.Time { return now })
	for i := 0; i < 1000; i++ {
		l.allow(fmt.Sprintf("ip:%d", i))
	}
	now = now.Add(2 * time.Minute)
	l.allow("ip:new")
	if n := len(l.buckets); n != 1 {
		t.Fatalf("%d buckets kept after every identity idled; want 1", n)
	}
	for i := 0; i < maxRateKeys+10; i++ {
		l.allow(fmt.Sprintf("ip:%d", i))
	}
	if n := len(l.buckets); n > maxRateKeys {
		t.Fatalf("%d buckets; the table is bounded at %d", n, maxRateKeys)
	}
}

func TestLimiterOff(t *testing.T) {
	t.Parallel()
	if newLimiter(0, 10, time.Now) != nil {
		t.Fatal("a zero rate must turn the limit off")
	}
}
