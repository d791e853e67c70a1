package services_test

import (
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
)

// Durations and counts read as people write them: "30m", not "30m0s";
// "1 model call", not "1 model calls".
func TestDurationsAndCountsReadAsWritten(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Minute: "30m", 90 * time.Minute: "1h30m", 2 * time.Hour: "2h", 45 * time.Second: "45s", 1500 * time.Millisecond: "1.5s"} {
		if got := services.ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%s) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int]string{0: "0 model calls", 1: "1 model call", 2: "2 model calls"} {
		if got := services.Count(n, "model call", "model calls"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
