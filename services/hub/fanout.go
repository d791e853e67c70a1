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

var _ services.Publisher = Fanout{}

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
