package main

import (
	"context"
	"time"
)

// pollEvery checks cond every interval until it holds or timeout passes,
// and reports whether it held. It waits for a state another process, the
// database or a goroutine reaches, never for a duration: callers give
// generous timeouts and assert nothing about how long it took.
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

// pause waits d or until ctx ends, whichever comes first. It is the pace
// of a load generator or the backoff of a reconnecting client, never a
// wait for something to happen: those poll a condition.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
