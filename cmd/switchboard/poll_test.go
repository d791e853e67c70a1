package main

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/internal/polltest"
)

// pollEvery waits for a condition (polltest.Every): a state another
// process, the database or a goroutine reaches, never a duration.
var pollEvery = polltest.Every

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
