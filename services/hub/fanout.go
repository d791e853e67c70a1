package hub

import (
	"context"

	"github.com/switchboard/switchboard/services"
)

// Fanout publishes to this process's hub first, for the lowest latency, and
// then to the other instances (NOTIFY; the publisher's own echo is dropped
// by its listener).
type Fanout struct {
	Hub    *Hub
	Remote services.Publisher
}

var _ services.TxPublisher = Fanout{}

// Publish implements services.Publisher.
func (f Fanout) Publish(ctx context.Context, e services.Event) error {
	if f.Hub != nil {
		f.Hub.Notify(e)
	}
	if f.Remote != nil {
		return f.Remote.Publish(ctx, e)
	}
	return nil
}

// PublishTx sends e to the other instances with tx when the remote can
// (services.TxPublisher); PublishCommitted delivers it here after the
// commit.
func (f Fanout) PublishTx(ctx context.Context, tx services.Tx, e services.Event) error {
	if r, ok := f.Remote.(services.TxPublisher); ok {
		return r.PublishTx(ctx, tx, e)
	}
	return nil
}

// PublishCommitted delivers an event given to PublishTx to this process's
// hub, and to a remote that could not take it with the transaction.
func (f Fanout) PublishCommitted(ctx context.Context, e services.Event) {
	if f.Hub != nil {
		f.Hub.Notify(e)
	}
	if r, ok := f.Remote.(services.TxPublisher); ok {
		r.PublishCommitted(ctx, e)
	} else if f.Remote != nil {
		_ = f.Remote.Publish(ctx, e)
	}
}
