// Package polltest is the tests' one way to wait for a condition: a state
// another goroutine, process or the database reaches, never a duration.
// Callers give generous timeouts and assert nothing about how long it took.
package polltest

import "time"

// Until checks cond every 20 ms until it holds or timeout passes, and
// reports whether it held.
func Until(timeout time.Duration, cond func() bool) bool {
	return Every(timeout, 20*time.Millisecond, cond)
}

// Every is Until checking every interval, for conditions that are costly
// to check or must be seen holding across a gap.
func Every(timeout, every time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(every)
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
