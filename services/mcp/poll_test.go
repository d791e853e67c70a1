package mcp_test

import "time"

// poll checks cond every few milliseconds until it holds or timeout
// passes, and reports whether it held. It waits for a state another
// goroutine or the database reaches, never for a duration, so callers
// give generous timeouts and assert nothing about how long it took.
func poll(timeout time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}
