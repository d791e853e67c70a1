package hub

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
)

// memRows is an in-memory timeline standing in for the repository.
type memRows struct {
	mu   sync.Mutex
	rows map[string][]services.Message
	next int64
}

func (m *memRows) add(tl string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	if m.rows == nil {
		m.rows = map[string][]services.Message{}
	}
	m.rows[tl] = append(m.rows[tl], services.Message{ID: m.next, TimelineScope: tl, Visible: true})
	return m.next
}

func (m *memRows) After(_ context.Context, tl string, after int64, limit int) ([]services.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []services.Message
	for _, r := range m.rows[tl] {
		if r.ID > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *memRows) LatestID(_ context.Context, tl string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.rows[tl]
	if len(rs) == 0 {
		return 0, nil
	}
	return rs[len(rs)-1].ID, nil
}

func startHub(t *testing.T, rows Rows) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := New(rows, nil)
	go h.Run(ctx)
	return h
}

func recv(t *testing.T, s services.Subscription) services.TimelineItem {
	t.Helper()
	select {
	case it, ok := <-s.Items():
		if !ok {
			t.Fatal("subscription closed")
		}
		return it
	case <-time.After(2 * time.Second):
		t.Fatal("no item within 2s")
	}
	return services.TimelineItem{}
}

func TestHubDeliversInOrderPerTimeline(t *testing.T) {
	t.Parallel()
	rows := &memRows{}
	rows.add("global") // before subscription: not delivered live
	h := startHub(t, rows)
	ctx := context.Background()
	a, _ := h.Subscribe(ctx, "global", 16)
	b, _ := h.Subscribe(ctx, "global", 16)
	other, _ := h.Subscribe(ctx, "tg:1", 16)
	if a.StartID() != 1 {
		t.Fatalf("StartID = %d, want 1", a.StartID())
	}
	id2 := rows.add("global")
	id3 := rows.add("global")
	// Only the last event is notified: the hub still fetches both rows.
	h.Notify(services.Event{Type: services.EventMessage, TimelineScope: "global", ID: id3})
	// An echo of an already delivered id is ignored.
	h.Notify(services.Event{Type: services.EventMessage, TimelineScope: "global", ID: id2})
	for _, s := range []services.Subscription{a, b} {
		if got := recv(t, s).Message.ID; got != id2 {
			t.Fatalf("first = %d, want %d", got, id2)
		}
		if got := recv(t, s).Message.ID; got != id3 {
			t.Fatalf("second = %d, want %d", got, id3)
		}
	}
	h.Notify(services.Event{Type: services.EventDelta, TimelineScope: "global", RunID: 7})
	if it := recv(t, a); it.Event == nil || it.Event.RunID != 7 {
		t.Fatalf("transient event: %+v", it)
	}
	select {
	case it := <-other.Items():
		t.Fatalf("other timeline got %+v", it)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestHubDropsSlowSubscriberWithoutBlockingOthers(t *testing.T) {
	t.Parallel()
	rows := &memRows{}
	h := startHub(t, rows)
	ctx := context.Background()
	slow, _ := h.Subscribe(ctx, "global", 2)
	fast, _ := h.Subscribe(ctx, "global", 1000)
	for i := 0; i < 50; i++ {
		id := rows.add("global")
		h.Notify(services.Event{Type: services.EventMessage, TimelineScope: "global", ID: id})
	}
	for i := 1; i <= 50; i++ {
		if got := recv(t, fast).Message.ID; got != int64(i) {
			t.Fatalf("fast subscriber got %d, want %d", got, i)
		}
	}
	n := 0
	for range slow.Items() { // closed after its buffer
		n++
	}
	if n != 2 || !slow.Dropped() {
		t.Fatalf("slow subscriber: got %d items, dropped=%v", n, slow.Dropped())
	}
	if h.Subscribers() != 1 {
		t.Fatalf("subscribers = %d, want 1", h.Subscribers())
	}
	h.Unsubscribe(slow) // safe after a drop
	h.Unsubscribe(fast)
	if !poll(10*time.Second, func() bool { return h.Subscribers() == 0 }) {
		t.Fatalf("subscribers = %d after unsubscribe", h.Subscribers())
	}
}

func TestHubResyncFetchesMissedRows(t *testing.T) {
	t.Parallel()
	rows := &memRows{}
	h := startHub(t, rows)
	s, _ := h.Subscribe(context.Background(), "global", 16)
	rows.add("global") // its notification was lost
	h.Resync()
	if got := recv(t, s).Message.ID; got != 1 {
		t.Fatalf("resync delivered %d", got)
	}
}

// A row committed after an event was queued must not overtake the
// transient events queued before its own event.
func TestHubKeepsRowsBehindEarlierEvents(t *testing.T) {
	t.Parallel()
	rows := &memRows{}
	h := startHub(t, rows)
	s, _ := h.Subscribe(context.Background(), "global", 16)
	marker := rows.add("global")
	answer := rows.add("global") // committed before the hub gets to the marker's event
	h.Notify(services.Event{Type: services.EventMessage, TimelineScope: "global", ID: marker})
	h.Notify(services.Event{Type: services.EventDelta, TimelineScope: "global", RunID: 1})
	h.Notify(services.Event{Type: services.EventMessage, TimelineScope: "global", ID: answer})
	if it := recv(t, s); it.Message == nil || it.Message.ID != marker {
		t.Fatalf("first: %+v", it)
	}
	if it := recv(t, s); it.Event == nil || it.Event.Type != services.EventDelta {
		t.Fatalf("second must be the delta, got %+v", it)
	}
	if it := recv(t, s); it.Message == nil || it.Message.ID != answer {
		t.Fatalf("third: %+v", it)
	}
}
