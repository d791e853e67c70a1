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

// OutboundQueue schedules durable deliveries.
type OutboundQueue interface {
	// EnqueueOutbound schedules o; a second call with the same Key does
	// nothing. When ctx carries a transaction (WithTx), the delivery's job
	// joins it: a reply and its delivery commit together.
	EnqueueOutbound(ctx context.Context, o Outbound) error
}

type txKey struct{}

// WithTx returns ctx carrying tx, a Store given by Transact, so that work
// scheduled through ctx (an outbound delivery routed while a reply is
// stored) commits with that transaction.
func WithTx(ctx context.Context, tx Store) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFrom returns the transaction ctx carries, or nil.
func TxFrom(ctx context.Context) Store {
	tx, _ := ctx.Value(txKey{}).(Store)
	return tx
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
// the message being answered, after the reply is committed.
type ReplyRouter interface {
	// RouteReply schedules delivery of reply to where to came from; it must
	// be idempotent per reply id (it may be called again after a crash).
	RouteReply(ctx context.Context, to Message, reply Message) error
}

// RunObserver hears about main runs starting and ending, e.g. to show a
// "typing" indicator in the channel the trigger came from.
type RunObserver interface {
	RunStarted(ctx context.Context, run Run, trigger Message)
	RunFinished(ctx context.Context, run Run, trigger Message)
}
