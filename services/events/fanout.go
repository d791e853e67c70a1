package events

import (
	"context"

	"github.com/switchboard/switchboard/services"
)

// Fanout publishes to this process's hub first, for the lowest latency, and
// then to every instance (NOTIFY). The hub ignores the echo of an event it
// already delivered, because it tracks the last delivered id per timeline.
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
