package main

import (
	"time"

	"github.com/switchboard/switchboard/internal/polltest"
	"github.com/switchboard/switchboard/internal/servetest"
)

// pollEvery waits for a condition (polltest.Every): a state another
// process, the database or a goroutine reaches, never a duration.
var pollEvery = polltest.Every

// pause paces a load generator or a reconnecting client (servetest.Pause).
var pause = servetest.Pause

// waitUntil polls cond every 100 ms until it holds or within passes.
func waitUntil(within time.Duration, cond func() bool) bool {
	return pollEvery(within, 100*time.Millisecond, cond)
}
