package repository

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestConnectionLostMidStatementIsUnavailable: when the server goes away
// while a statement runs (a crash, a failover), the caller gets
// EUNAVAILABLE (a 503 with Retry-After on the web) and retries with its
// key, not an internal error.
func TestConnectionLostMidStatementIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{io.ErrUnexpectedEOF, syscall.ECONNRESET, fmt.Errorf("read: %w", syscall.EPIPE)} {
		err := wrapErr("insert message", fmt.Errorf("conn: %w", cause))
		var se *services.Error
		if !errors.As(err, &se) || se.Kind != services.EUNAVAILABLE {
			t.Errorf("%v: %v; want EUNAVAILABLE", cause, err)
		}
	}
	if err := wrapErr("insert message", errors.New("syntax error")); errors.As(err, new(*services.Error)) {
		t.Errorf("an ordinary error became %v", err)
	}
}
