package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// outcome is what is known of one Bot API call that sends a message.
type outcome uint8

const (
	// sent: Telegram answered with the message.
	sent outcome = iota
	// refused: Telegram answered with an error of the request itself
	// (400, 403, 404, 429, …): nothing was sent.
	refused
	// notSent: the request never reached Telegram (no connection, nothing
	// written) or the answer was a server error (500, 502, 503, often a
	// proxy's HTML page): nothing was sent, and the same request may
	// succeed a moment later.
	notSent
	// unknown: the request was written and no answer came (a timeout, a
	// connection dropped, a gateway timeout 504): the message may be in
	// the chat or not.
	unknown
)

// callTrace records what happened to one call on the wire: whether its
// request was written, and the HTTP status of the answer (0: none).
type callTrace struct {
	wrote  atomic.Bool
	status atomic.Int32
}

type traceKey struct{}

// statusTransport records each answer's HTTP status in the call's trace (the
// bot library reports a non-JSON answer, such as a proxy's 502 page, only as
// an undecodable body).
type statusTransport struct{ base http.RoundTripper }

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if tr, ok := req.Context().Value(traceKey{}).(*callTrace); ok && resp != nil {
		tr.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// tracedClient is c with a transport that records answers' statuses.
func tracedClient(c *http.Client) *http.Client {
	out := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = statusTransport{base}
	return &out
}

// errSendTimeout ends a call whose request could not be written within
// SendTimeout, or whose answer did not come within AnswerTimeout after.
var errSendTimeout = errors.New("no answer in time")

// call makes one Bot API call that sends a message and says what is known
// of its outcome. SendTimeout bounds the time until the request is written;
// once it is on the wire, the wait for the answer is AnswerTimeout (longer:
// Telegram sometimes answers a processed sendMessage late, and giving up
// early would send it twice).
func (b *Bot) call(ctx context.Context, fn func(context.Context) (*models.Message, error)) (*models.Message, outcome, error) {
	return callAPI(ctx, b, fn)
}

// callAPI is call for any Bot API method.
func callAPI[T any](ctx context.Context, b *Bot, fn func(context.Context) (T, error)) (T, outcome, error) {
	tr := &callTrace{}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(b.opts.SendTimeout, func() { cancel(errSendTimeout) })
	defer timer.Stop()
	ctx = context.WithValue(ctx, traceKey{}, tr)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil && !tr.wrote.Swap(true) {
			timer.Reset(b.opts.AnswerTimeout)
		}
	}})
	m, err := fn(ctx)
	if err == nil {
		return m, sent, nil
	}
	var zero T
	if errors.Is(context.Cause(ctx), errSendTimeout) {
		err = fmt.Errorf("%w (%w)", err, errSendTimeout)
	}
	oc := classify(err, tr)
	if status := int(tr.status.Load()); status >= 300 {
		err = &statusError{status: status, err: err}
	}
	return zero, oc, err
}

// classify says what a failed call did. Only a request that was written
// and got no usable answer has an unknown outcome.
func classify(err error, tr *callTrace) outcome {
	var tooMany *bot.TooManyRequestsError
	status := int(tr.status.Load())
	switch {
	case errors.As(err, &tooMany) || errors.Is(err, bot.ErrorBadRequest) || errors.Is(err, bot.ErrorForbidden) ||
		errors.Is(err, bot.ErrorNotFound) || errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorConflict):
		return refused
	case status == 0 && !tr.wrote.Load():
		return notSent // never on the wire
	case status == 0, status == http.StatusGatewayTimeout:
		// No answer, or a proxy that gave up waiting for Telegram, which
		// may have taken the message meanwhile.
		return unknown
	case status >= 500:
		// Telegram's own ok:false 500, or a proxy's 502/503 page:
		// Telegram did not take the message.
		return notSent
	case status >= 400:
		return notSent // a proxy's refusal (a 4xx page Telegram never saw)
	}
	return unknown // a 2xx answer that could not be read
}

// statusError is a call answered with an HTTP error status that the bot
// library could not read as the Bot API's answer (a proxy's page) or read
// as a server error.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string {
	msg := e.err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return fmt.Sprintf("Telegram answered HTTP %d: %s", e.status, msg)
}

func (e *statusError) Unwrap() error { return e.err }

// maxProbe bounds the message ids findSent looks at.
const maxProbe = 50

// findSent looks for a text chunk whose send had no answer, in the chat
// after prev, the id of the message this delivery sent just before it: the
// lane sends one thing at a time, so the only message of the bot after prev
// can be that chunk. It asks Telegram to edit each later message to the
// chunk's text: "not modified" (or an edit that took) is the chunk;
// "can't be edited" is somebody else's message; "not found" is past the
// end of the chat, where the chunk did not arrive. found is false when the
// chunk is not in the chat, or when that could not be told (known false).
func (b *Bot) findSent(ctx context.Context, chatID, prev int64, html string) (id int64, found, known bool, err error) {
	for id := prev + 1; id <= prev+maxProbe; id++ {
		_, oc, err := b.call(ctx, func(ctx context.Context) (*models.Message, error) {
			_, err := b.api.EditMessageText(ctx, &bot.EditMessageTextParams{
				ChatID: chatID, MessageID: int(id), Text: html, ParseMode: models.ParseModeHTML,
				LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: bot.True()},
			})
			return nil, err
		})
		switch {
		case oc == sent:
			return id, true, true, nil
		case oc != refused:
			return 0, false, false, err
		case strings.Contains(err.Error(), "message is not modified"):
			return id, true, true, nil
		case strings.Contains(err.Error(), "message to edit not found"):
			return 0, false, true, nil
		}
		// Somebody else's message, or one that is not text: go on.
	}
	return 0, false, false, nil
}
