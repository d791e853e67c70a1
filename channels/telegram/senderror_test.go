package telegram

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-telegram/bot"
)

func TestSendErrorsAreCountedByCode(t *testing.T) {
	var got []string
	b := &Bot{opts: options{Deps: Deps{SendError: func(code string) { got = append(got, code) }}}}
	for _, err := range []error{
		&bot.TooManyRequestsError{RetryAfter: 3},
		fmt.Errorf("send: %w", bot.ErrorForbidden),
		fmt.Errorf("send: %w", bot.ErrorBadRequest),
		fmt.Errorf("send: %w", bot.ErrorNotFound),
		errors.New("connection reset"),
	} {
		b.countSendError(err)
	}
	if fmt.Sprint(got) != "[429 403 400 404 network]" {
		t.Fatalf("codes: %v", got)
	}
	(&Bot{}).countSendError(errors.New("x")) // no counter: no panic
}
