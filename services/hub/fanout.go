package hub

import (
	"context"

	"github.com/switchboard/switchboard/services"
)

// Fanout publishes to this process's hub first, for the lowest latency, and
// then to the other instances (NOTIFY; the publisher's own echo is dropped
// by its listener).
type Fanout struct {
	Hub *Hub
	// Remote sends to the other instances, with a transaction's commit
	// when given one (repository.Notifier); nil: this instance only.
	Remote services.TxPublisher
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

// PublishTx sends e to the other instances with tx's commit;
// PublishCommitted delivers it here after the commit.
func (f Fanout) PublishTx(ctx context.Context, tx services.Tx, e services.Event) error {
	if f.Remote != nil {
		return f.Remote.PublishTx(ctx, tx, e)
	}
	return nil
}

// PublishCommitted delivers an event given to PublishTx to this process's
// hub, and to a remote that could not take it with the transaction.
func (f Fanout) PublishCommitted(ctx context.Context, e services.Event) {
	if f.Hub != nil {
		f.Hub.Notify(e)
	}
	if f.Remote != nil {
		f.Remote.PublishCommitted(ctx, e)
	}
}
