// Package hub fans timeline events out to the subscribers of one process:
// websocket clients, the Telegram outbound sender. One goroutine owns all
// state; every subscriber has a bounded buffer, and a subscriber that falls
// behind is dropped (its channel closed) rather than allowed to block the
// others. A dropped client reconnects with its last seen id and catches up
// from the database, so nothing is lost.
//
// Message events carry ids only. The hub keeps, per timeline with
// subscribers, the id of the last message it delivered, and on an event
// fetches the rows after it once, for all subscribers. Inserts into one
// timeline are serialised in the repository, so ids commit in order and
// "rows after the last id" never skips one.
package hub

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/services"
)

// Rows is where the hub reads visible timeline rows.
type Rows interface {
	// After returns visible rows of a timeline with id > afterID, ascending.
	After(ctx context.Context, timelineScope string, afterID int64, limit int) ([]services.Message, error)
	// LatestID returns the newest visible id of a timeline (0 when empty).
	LatestID(ctx context.Context, timelineScope string) (int64, error)
}

// Subscription is one subscriber's stream (services.Subscription).
type Subscription struct {
	c        chan services.TimelineItem
	timeline string
	id       uint64
	startID  int64
	dropped  atomic.Bool
}

var (
	_ services.Subscription = (*Subscription)(nil)
	_ services.Feed         = (*Hub)(nil)
)

// Items is closed when the subscriber is dropped (too slow) or unsubscribed.
func (s *Subscription) Items() <-chan services.TimelineItem { return s.c }

// StartID is the hub's last delivered id for the timeline when the
// subscription began: the subscriber fetches its backlog up to at least
// this id itself; everything after it arrives on Items.
func (s *Subscription) StartID() int64 { return s.startID }

// Dropped reports whether the hub dropped the subscription for being slow.
func (s *Subscription) Dropped() bool { return s.dropped.Load() }

type timelineState struct {
	lastID int64
	subs   map[uint64]*Subscription
}

type subscribeReq struct {
	timeline string
	buffer   int
	reply    chan subscribeReply
}

type subscribeReply struct {
	sub *Subscription
	err error
}

// Hub is the in-process fan-out. Create it with NewHub and run it with Run.
type Hub struct {
	rows   Rows
	log    *slog.Logger
	in     chan services.Event
	sub    chan subscribeReq
	unsub  chan *Subscription
	resync chan struct{}
	nextID uint64
	tls    map[string]*timelineState
	count  atomic.Int64
	// OnDrop, when set, is called (from the hub goroutine) for each dropped subscriber.
	OnDrop func(timeline string)
}

// NewHub returns a hub reading rows from rows.
func New(rows Rows, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		rows:   rows,
		log:    log,
		in:     make(chan services.Event, 4096),
		sub:    make(chan subscribeReq),
		unsub:  make(chan *Subscription, 64),
		resync: make(chan struct{}, 1),
		tls:    map[string]*timelineState{},
	}
}

// Subscribers is the number of live subscriptions.
func (h *Hub) Subscribers() int { return int(h.count.Load()) }

// Notify hands the hub an event (from this process or from NOTIFY). It never
// blocks the caller for long: if the hub's inbox is full the event is
// dropped and a resync is scheduled, which refetches every timeline.
func (h *Hub) Notify(e services.Event) {
	select {
	case h.in <- e:
	default:
		h.Resync()
	}
}

// Resync makes the hub refetch every subscribed timeline (after a lost
// LISTEN connection, notifications may have been missed).
func (h *Hub) Resync() {
	select {
	case h.resync <- struct{}{}:
	default:
	}
}

// Subscribe registers a subscriber of a timeline with a buffer of n items.
func (h *Hub) Subscribe(ctx context.Context, timeline string, n int) (services.Subscription, error) {
	if n <= 0 {
		n = 256
	}
	req := subscribeReq{timeline: timeline, buffer: n, reply: make(chan subscribeReply, 1)}
	select {
	case h.sub <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-req.reply:
		if r.err != nil {
			return nil, r.err
		}
		return r.sub, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Unsubscribe removes a subscription; safe to call twice or after a drop.
func (h *Hub) Unsubscribe(sub services.Subscription) {
	if s, ok := sub.(*Subscription); ok && s != nil {
		h.unsub <- s
	}
}

// Run owns the hub's state until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			for _, st := range h.tls {
				for _, s := range st.subs {
					h.remove(st, s)
				}
			}
			return
		case req := <-h.sub:
			s, err := h.add(ctx, req)
			req.reply <- subscribeReply{s, err}
		case s := <-h.unsub:
			if st := h.tls[s.timeline]; st != nil {
				if _, ok := st.subs[s.id]; ok {
					h.remove(st, s)
				}
				if len(st.subs) == 0 {
					delete(h.tls, s.timeline)
				}
			}
		case e := <-h.in:
			h.handle(ctx, e)
		case <-h.resync:
			for tl, st := range h.tls {
				h.catchUp(ctx, tl, st, 0)
			}
		}
	}
}

func (h *Hub) add(ctx context.Context, req subscribeReq) (*Subscription, error) {
	st := h.tls[req.timeline]
	if st == nil {
		st = &timelineState{subs: map[uint64]*Subscription{}}
		// Start from the newest visible row: subscribers fetch their own
		// backlog up to StartID.
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last, err := h.rows.LatestID(fctx, req.timeline)
		cancel()
		if err != nil {
			return nil, err
		}
		st.lastID = last
		h.tls[req.timeline] = st
	}
	h.nextID++
	c := make(chan services.TimelineItem, req.buffer)
	s := &Subscription{c: c, timeline: req.timeline, id: h.nextID, startID: st.lastID}
	st.subs[s.id] = s
	h.count.Add(1)
	return s, nil
}

func (h *Hub) remove(st *timelineState, s *Subscription) {
	delete(st.subs, s.id)
	close(s.c)
	h.count.Add(-1)
}

func (h *Hub) handle(ctx context.Context, e services.Event) {
	st := h.tls[e.TimelineScope]
	if st == nil {
		return // nobody here listens to that timeline
	}
	if e.Type == services.EventMessage {
		if e.ID > st.lastID {
			// Only up to this event's row: a row committed since, whose own
			// event is still queued behind transient events (streamed text
			// of the run that wrote it), must not overtake them.
			h.catchUp(ctx, e.TimelineScope, st, e.ID)
		}
		return
	}
	ev := e
	h.deliver(e.TimelineScope, st, services.TimelineItem{Event: &ev})
}

// catchUp fetches the rows after the timeline's last delivered id, up to
// upTo (0: all), and delivers them in order.
func (h *Hub) catchUp(ctx context.Context, timeline string, st *timelineState, upTo int64) {
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rows, err := h.rows.After(fctx, timeline, st.lastID, 500)
		cancel()
		if err != nil {
			h.log.Warn("hub: fetch rows", "timeline", timeline, "after_id", st.lastID, "err", err)
			return
		}
		for i := range rows {
			m := rows[i]
			if upTo > 0 && m.ID > upTo {
				return
			}
			st.lastID = m.ID
			h.deliver(timeline, st, services.TimelineItem{Message: &m})
		}
		if len(rows) < 500 {
			return
		}
	}
}

func (h *Hub) deliver(timeline string, st *timelineState, it services.TimelineItem) {
	for _, s := range st.subs {
		select {
		case s.c <- it:
		default:
			s.dropped.Store(true)
			h.remove(st, s)
			if h.OnDrop != nil {
				h.OnDrop(timeline)
			}
			h.log.Info("hub: dropped slow subscriber", "timeline", timeline)
		}
	}
}
