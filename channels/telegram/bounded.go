package telegram

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-telegram/bot/models"
)

// An update whose handling keeps failing is given up after
// maxUpdateAttempts attempts, or after updateRetryWindow when it failed at
// least twice, whichever comes first: no single update holds the chat (a
// photo Telegram cannot hand over, a message the service cannot store).
const (
	maxUpdateAttempts = 5
	updateRetryWindow = time.Minute
)

// updateFailures counts the failed attempts of updates not confirmed yet.
type updateFailures struct {
	mu sync.Mutex
	m  map[int64]*updateFailure
}

type updateFailure struct {
	n     int
	first time.Time
}

// add records a failed attempt of update id and returns the failure.
func (f *updateFailures) add(id int64) updateFailure {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) > 1000 {
		f.m = map[int64]*updateFailure{}
	}
	u := f.m[id]
	if u == nil {
		u = &updateFailure{first: time.Now()}
		f.m[id] = u
	}
	u.n++
	return *u
}

func (f *updateFailures) forget(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, id)
}

// handle is HandleUpdate with its retries bounded. nil: the update may be
// confirmed (stored, or given up with its sender told). An error: it must
// come again, after retryIn.
func (b *Bot) handle(ctx context.Context, upd *models.Update) (retryIn time.Duration, err error) {
	err = b.HandleUpdate(ctx, upd)
	if err == nil {
		b.failures.forget(upd.ID)
		return 0, nil
	}
	if ctx.Err() != nil {
		return 0, err
	}
	f := b.failures.add(upd.ID)
	retryIn = min(b.opts.RetryBackoff<<min(f.n, 10), 30*time.Second)
	if f.n < maxUpdateAttempts && (f.n < 2 || time.Since(f.first) < updateRetryWindow) {
		return retryIn, err
	}
	if gerr := b.giveUpUpdate(ctx, upd, err); gerr != nil {
		// Not even the notice can be scheduled (the database is away):
		// every update would fail alike, so this one keeps its place.
		return retryIn, errors.Join(err, gerr)
	}
	b.failures.forget(upd.ID)
	return 0, nil
}

// giveUpUpdate tells the sender of an update that could not be handled why, so
// that the update can be confirmed.
func (b *Bot) giveUpUpdate(ctx context.Context, upd *models.Update, cause error) error {
	msg, edited := upd.Message, false
	if msg == nil {
		msg, edited = upd.EditedMessage, true
	}
	b.log.Error("telegram: update given up after failed attempts", "update_id", upd.ID, "err", cause)
	var un *unaddressedError
	if msg == nil || msg.From == nil || errors.As(cause, &un) {
		return nil // nobody to tell (or not known to be meant for the bot)
	}
	var fe *fetchError
	text := "I could not take this message: storing it kept failing. Please send it again in a few minutes."
	if errors.As(cause, &fe) {
		text = fmt.Sprintf("I could not download this %s (%s). Please send it again.", fe.what, fe.reason)
	}
	return b.notice(ctx, msg, "failed:"+dedupeKey(upd.ID, msg, edited), text)
}

// unaddressedError: whether a group message is meant for the bot is not
// known (getMe fails).
type unaddressedError struct{ err error }

func (e *unaddressedError) Error() string { return e.err.Error() }
func (e *unaddressedError) Unwrap() error { return e.err }

// fetchError is a file of a message that could not be downloaded from
// Telegram; reason is for its sender (no token, no URL).
type fetchError struct {
	what, reason string
	err          error
}

func (e *fetchError) Error() string {
	return fmt.Sprintf("telegram: download %s: %s: %v", e.what, e.reason, e.err)
}
func (e *fetchError) Unwrap() error { return e.err }

// why says in a few words why a Bot API call failed.
func why(method string, oc outcome, err error) string {
	var se *statusError
	switch {
	case errors.Is(err, errSendTimeout):
		return "Telegram did not answer " + method + " in time"
	case errors.As(err, &se):
		return fmt.Sprintf("Telegram answered %s with HTTP %d", method, se.status)
	case oc == notSent:
		return "Telegram could not be reached"
	}
	return "Telegram answered " + method + " with an error"
}
