package services_test

import (
	"testing"

	"github.com/switchboard/switchboard/services"
)

// A size just over a limit reads larger than the limit, not the same.
func TestHumanBytesShowsAFileOverALimitAsLarger(t *testing.T) {
	for n, want := range map[int64]string{
		512: "512 B", 1536: "2 KB", 20 << 20: "20.0 MB", 21_000_000: "20.03 MB", 3 << 19: "1.5 MB", 150 << 20: "150.0 MB",
	} {
		if got := services.HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
