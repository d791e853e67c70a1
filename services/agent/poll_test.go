package agent_test

import "github.com/switchboard/switchboard/internal/polltest"

// poll waits for a condition (polltest.Until): a state, never a duration.
var poll = polltest.Until
