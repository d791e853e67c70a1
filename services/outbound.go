package services

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Outbound is one durable delivery to an external channel (a Telegram
// answer). Payload is the channel's own format; Key makes enqueueing
// idempotent (the same key is delivered once). Deliveries of one Lane (a
// Telegram chat) go out one at a time in the order they were scheduled,
// across retries, restarts and instances; an empty Lane is a lane of its
// own.
type Outbound struct {
	Channel Source
	Key     string
	Lane    string
	Payload json.RawMessage
}

// OutboundQueue schedules durable deliveries; a second call with the same
// Key does nothing.
type OutboundQueue interface {
	// EnqueueOutbound schedules o in a transaction of its own.
	EnqueueOutbound(ctx context.Context, o Outbound) error
	// EnqueueOutboundTx schedules o in tx: a reply and its delivery commit
	// together.
	EnqueueOutboundTx(ctx context.Context, tx Tx, o Outbound) error
}

// OutboundHandler delivers one payload of its channel. A *RetryAfterError
// defers the delivery by its delay without counting a failed attempt; any
// other error is retried with backoff.
type OutboundHandler func(ctx context.Context, payload json.RawMessage) error

// RetryAfterError asks the queue to try again after Delay (HTTP 429).
type RetryAfterError struct{ Delay time.Duration }

func (e *RetryAfterError) Error() string { return fmt.Sprintf("retry after %s", e.Delay) }

// ReplyRouter sends replies back to the external channel a message came
// from (Telegram). ChatService calls the router registered for the source of
// the message being answered, in the reply's transaction.
type ReplyRouter interface {
	// RouteReplyTx schedules, in tx, the delivery of reply to where to came
	// from; it must be idempotent per reply id (it may be called again
	// after a crash).
	RouteReplyTx(ctx context.Context, tx Tx, to Message, reply Message) error
}

// RunObserver hears about main runs starting and ending, e.g. to show a
// "typing" indicator in the channel the trigger came from.
type RunObserver interface {
	RunStarted(ctx context.Context, run Run, trigger Message)
	RunFinished(ctx context.Context, run Run, trigger Message)
}
