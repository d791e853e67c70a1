package services

import (
	"context"
	"encoding/json"
)

// Event types.
const (
	// EventMessage: a visible message was stored in a timeline (ID is its id).
	EventMessage = "message"
	// EventRun: a run changed status (RunID; Data carries the status).
	EventRun = "run"
	// EventDelta: streamed answer text of a running run (Data carries text).
	EventDelta = "delta"
	// EventTool: a main run's tool call started or ended (Data is a ToolUse).
	EventTool = "tool"
	// EventTranscript: a file of the visible message ID got its transcript
	// (clients read the message again).
	EventTranscript = "transcript"
)

// Event is what crosses instances through the publisher. Message events
// carry ids only; subscribers fetch the rows, so no message text travels
// through NOTIFY.
type Event struct {
	Type          string          `json:"t"`
	TimelineScope string          `json:"tl"`
	ID            int64           `json:"id,omitempty"`
	RunID         int64           `json:"run,omitempty"`
	Data          json.RawMessage `json:"d,omitempty"`
	// Origin is the publishing instance; an instance ignores the NOTIFY
	// echo of its own events (it delivered them locally already).
	Origin string `json:"o,omitempty"`
}

// RunEvent says run id of timelineScope is now status.
func RunEvent(timelineScope string, id int64, status RunStatus) Event {
	return Event{Type: EventRun, TimelineScope: timelineScope, RunID: id, Data: []byte(`{"status":"` + status + `"}`)}
}

// Publisher sends events to every instance's hub. Publish is called after
// the transaction that produced the event has committed.
type Publisher interface {
	// Publish delivers e to all instances; EUNAVAILABLE when the database
	// cannot be reached (the rows are stored; clients catch up on reconnect).
	Publish(ctx context.Context, e Event) error
}

// TxPublisher is a Publisher that can also send an event with the
// transaction that produced it, so the event costs no commit of its own:
// the other instances hear it when the transaction commits (NOTIFY is
// transactional) and nothing when it rolls back. After the commit the
// caller hands the same event to PublishCommitted, which delivers it to
// this instance's listeners (and does whatever PublishTx could not).
type TxPublisher interface {
	Publisher
	// PublishTx queues e to be sent with tx's commit, after the events
	// published before it.
	PublishTx(ctx context.Context, tx Tx, e Event) error
	// PublishCommitted is called once tx committed, for each event given
	// to PublishTx: it delivers e in this process, exactly once.
	PublishCommitted(ctx context.Context, e Event)
}

// TimelineItem is what a timeline's subscriber receives: a stored message,
// or a transient event (run status, streamed text) with no row behind it.
type TimelineItem struct {
	Message *Message
	Event   *Event
}

// Subscription is one subscriber's stream of a timeline.
type Subscription interface {
	// Items delivers the timeline's rows in id order, each once, and its
	// events; it is closed when the subscriber is dropped or unsubscribed.
	Items() <-chan TimelineItem
	// StartID is the last id delivered before the subscription began: the
	// subscriber reads its backlog up to it from the store.
	StartID() int64
	// Dropped reports whether the subscriber was dropped for being slow.
	Dropped() bool
}

// Feed streams timelines to subscribers (the hub of each instance).
type Feed interface {
	// Subscribe starts a subscription with a buffer of n items.
	Subscribe(ctx context.Context, timeline string, n int) (Subscription, error)
	// Unsubscribe ends it; safe to call twice or after a drop.
	Unsubscribe(Subscription)
}
