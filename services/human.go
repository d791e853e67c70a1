package services

import (
	"fmt"
	"strings"
	"time"
)

// ShortDuration writes d as people write it: "30m", "1h30m", "45s",
// "1.5s" (time.Duration's String without its trailing zero units).
func ShortDuration(d time.Duration) string {
	s := d.String() // "1h30m0s", "10s", "1.5s"
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Count writes n and the noun, plural unless n is 1: "1 model call",
// "2 model calls".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
