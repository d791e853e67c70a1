package app_test

import "time"

// poll checks cond every few milliseconds until it holds or timeout
// passes, and reports whether it held. It waits for a state another
// goroutine, process or the database reaches, never for a duration, so
// callers give generous timeouts and assert nothing about how long it took.
func poll(timeout time.Duration, cond func() bool) bool {
	return pollEvery(timeout, 20*time.Millisecond, cond)
}

// pollEvery is poll checking every interval, for conditions that are
// costly to check or must be seen holding across a gap.
func pollEvery(timeout, every time.Duration, cond func() bool) bool {
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
