package repository

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/services"
)

// EventChannel is the LISTEN/NOTIFY channel events travel on. Within one
// database, instances sharing a search_path share it; the channel name is
// suffixed with the schema so isolated test schemas do not hear each other.
const EventChannel = "switchboard_events"

// Notifier publishes events with pg_notify and listens for everyone's.
type Notifier struct {
	pool    *pgxpool.Pool
	channel string
	log     *slog.Logger
	// origin identifies this instance in the events it publishes.
	origin string

	// Events waiting to be sent, and whether a sender is running: events
	// published while one batch is sent go together in the next, in one
	// transaction (one commit instead of one each).
	mu      sync.Mutex
	pending []string
	sending bool
	// linger is how long a sender that starts waits for the events
	// published just after the first (NotifyLinger); sends counts the
	// statements sent.
	linger time.Duration
	sends  atomic.Int64
	// inflight: the sender is sending a batch; progress is closed (and
	// replaced) when it is sent; hurry cuts the linger short for a
	// transaction whose own events must follow the pending ones.
	inflight bool
	progress chan struct{}
	hurry    chan struct{}
}

// NotifyLinger is how long the first event of a batch waits for the ones
// published with it before the batch is sent to the other instances: a
// turn's question, run status and answer come within milliseconds, and
// each send is a commit of its own. This instance's own listeners hear
// events at once (the hub delivers them locally); only other instances
// hear them this much later.
const NotifyLinger = 3 * time.Millisecond

var _ services.Publisher = (*Notifier)(nil)

// NewNotifier returns a Notifier on the pool's database and current schema.
func NewNotifier(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*Notifier, error) {
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, wrapErr("read current schema", err)
	}
	ch := EventChannel
	if schema != "public" {
		ch += "_" + schema
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Notifier{pool: pool, channel: ch, log: log, origin: hex.EncodeToString(b[:]), linger: NotifyLinger,
		progress: make(chan struct{}), hurry: make(chan struct{}, 1)}, nil
}

var _ services.TxPublisher = (*Notifier)(nil)

// encode is e as this instance sends it.
func (n *Notifier) encode(e services.Event) (string, error) {
	e.Origin = n.origin
	payload, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("store: encode event: %w", err)
	}
	if len(payload) > 7900 {
		return "", services.Errorf(services.ETOOLARGE, "event payload is %d bytes, NOTIFY allows 8000", len(payload))
	}
	return string(payload), nil
}

// runEvent is the status of a run of timelineScope that a statement
// creates or claims (CreateRun, the claims), as encode writes it, cut
// where the run's id goes: the statement, which learns the id, sends
// before || id || after.
func (n *Notifier) runEvent(timelineScope string, status services.RunStatus) (before, after string, err error) {
	const id = math.MaxInt64
	payload, err := n.encode(services.RunEvent(timelineScope, id, status))
	if err != nil {
		return "", "", err
	}
	// The timeline is a JSON string before it, whose quotes are escaped:
	// only the field itself reads "run":<id>.
	before, after, ok := strings.Cut(payload, `"run":`+strconv.FormatInt(id, 10))
	if !ok {
		return "", "", fmt.Errorf("store: encode run event: no run id in %s", payload)
	}
	return before + `"run":`, after, nil
}

// PublishTx sends e to the other instances with tx (a Tx of this
// package): by its last statement before COMMIT when Transact commits it,
// else at once in it. Either way they hear it when tx commits, after the
// events published before that statement (it waits for them to be sent),
// and nothing when it rolls back. This instance delivers its own events
// locally (PublishCommitted, the hub); NOTIFY's echo is dropped.
func (n *Notifier) PublishTx(ctx context.Context, tx services.Tx, e services.Event) error {
	t, ok := tx.(*Tx)
	if !ok {
		return services.Errorf(services.EINVALID, "publish event: %T is not a PostgreSQL transaction", tx)
	}
	payload, err := n.encode(e)
	if err != nil {
		return err
	}
	return t.addEvents(ctx, n, payload)
}

// PublishCommitted implements services.TxPublisher: the Notifier has no
// listeners of its own in this process, so nothing is left to do.
func (n *Notifier) PublishCommitted(context.Context, services.Event) {}

// addEvents queues payloads to be sent with t's commit, or sends them in t
// at once when t's owner commits it (after the events published before,
// which are sent first).
func (t *Tx) addEvents(ctx context.Context, n *Notifier, payloads ...string) error {
	t.notifier = n
	t.events = append(t.events, payloads...)
	if t.committed {
		return nil
	}
	n.waitIdle(ctx)
	events := t.events
	t.events = nil
	return t.notify(ctx, n, events)
}

// notify sends events on n's channel in t, in one statement.
func (t *Tx) notify(ctx context.Context, n *Notifier, events []string) error {
	_, err := t.tx.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, n.channel, events)
	n.sends.Add(1)
	return wrapErr("publish events", err)
}

// sendEvents sends t's events by the last statement before its COMMIT,
// after the events published before and not yet sent (Publish: a run's
// streamed text), which it takes from the sender: they commit together,
// in order, so a turn's events cost no commit of their own. A batch the
// sender is sending is waited for, as notifications reach the listeners
// in commit order. When the statement fails the taken events go back to
// the sender.
func (t *Tx) sendEvents(ctx context.Context) error {
	if len(t.events) == 0 {
		return nil
	}
	n := t.notifier
	taken := n.takePending(ctx)
	events := append(taken, t.events...)
	t.events = nil
	err := t.notify(ctx, n, events)
	if err != nil {
		n.requeue(taken)
	}
	return err
}

// carry takes the events a statement of t sends with itself, for n (the
// store's announcer): those waiting for the sender, then those t published
// so far, in order, as sendEvents would send them at COMMIT; the statement
// adds its own after them. ok is false (send nothing) unless Transact
// commits t as a transaction of its own. The taken events go back to the
// sender when t does not get to COMMIT.
func (t *Tx) carry(ctx context.Context, n *Notifier) (events []string, ok bool) {
	if !t.top || !t.committed || n == nil || (t.notifier != nil && t.notifier != n) {
		return nil, false
	}
	taken := n.takePending(ctx)
	t.notifier = n
	t.taken = append(t.taken, taken...)
	events = append(taken, t.events...)
	t.events = nil
	return events, true
}

// takePending waits for the batch being sent (or ctx's end) and takes the
// events waiting for the sender.
func (n *Notifier) takePending(ctx context.Context) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for n.inflight {
		progress := n.progress
		n.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			n.mu.Lock()
			return nil
		}
		n.mu.Lock()
	}
	taken := n.pending
	n.pending = nil
	return taken
}

// requeue gives events taken from the sender back to it, first.
func (n *Notifier) requeue(events []string) {
	if len(events) == 0 {
		return
	}
	n.mu.Lock()
	n.pending = append(events, n.pending...)
	start := !n.sending
	n.sending = true
	n.mu.Unlock()
	if start {
		go n.send()
	}
}

// waitIdle waits until the sender has sent everything (it skips the rest
// of its linger), or ctx ends.
func (n *Notifier) waitIdle(ctx context.Context) {
	n.mu.Lock()
	for n.inflight || len(n.pending) > 0 {
		progress := n.progress
		n.mu.Unlock()
		select {
		case n.hurry <- struct{}{}:
		default:
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return
		}
		n.mu.Lock()
	}
	n.mu.Unlock()
}

// Publish sends e to every listening instance (including this one). It
// returns once the event is queued: one sender per Notifier sends the
// queue in order, everything queued while it sent the previous batch in
// one statement, so events published together (a message and its run's
// status) cost one commit. Events are best effort, as before: a failed send
// is logged, and listeners resync when they reconnect.
func (n *Notifier) Publish(ctx context.Context, e services.Event) error {
	payload, err := n.encode(e)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.pending = append(n.pending, payload)
	start := !n.sending
	n.sending = true
	n.mu.Unlock()
	if start {
		go n.send()
	}
	return nil
}

// Flush waits until every event published so far is sent (or ctx ends):
// a short-lived process (`switchboard pair approve`) calls it before it
// exits so running instances hear what it did.
func (n *Notifier) Flush(ctx context.Context) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		n.mu.Lock()
		idle := !n.sending && len(n.pending) == 0
		n.mu.Unlock()
		if idle {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// send sends the queued events in batches until the queue is empty, the
// first after the linger.
func (n *Notifier) send() {
	select {
	case <-n.hurry: // left by a wait that ended meanwhile
	default:
	}
	if n.linger > 0 {
		t := time.NewTimer(n.linger)
		select {
		case <-t.C:
		case <-n.hurry:
			t.Stop()
		}
	}
	for {
		n.mu.Lock()
		batch := n.pending
		n.pending = nil
		if len(batch) == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		n.inflight = true
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		// A NOTIFY takes a transaction id, so its commit would wait for a
		// WAL flush like a real write; events are best effort (listeners
		// resync after a reconnect), so it commits asynchronously: the
		// setting is local to the statement's own transaction.
		if len(batch) == 1 {
			_, err = n.pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`, n.channel, batch[0])
		} else {
			// A function scan yields the array in order; notifications of
			// one transaction are delivered in the order they were sent.
			_, err = n.pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, p) FROM unnest($2::text[]) AS p`, n.channel, batch)
		}
		cancel()
		n.sends.Add(1)
		n.mu.Lock()
		n.inflight = false
		close(n.progress)
		n.progress = make(chan struct{})
		n.mu.Unlock()
		if err != nil {
			n.log.Warn("publish events", "events", len(batch), "err", err)
		}
	}
}

// Listen delivers every other instance's event to deliver until ctx ends, on a dedicated
// connection. When the connection is lost it reconnects with backoff and
// calls resync, because notifications sent meanwhile are gone.
func (n *Notifier) Listen(ctx context.Context, deliver func(services.Event), resync func()) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := n.listenOnce(ctx, deliver, func() {
			backoff = 100 * time.Millisecond
			if !first {
				resync()
			}
			first = false
		})
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("event listener lost its connection; reconnecting", "err", err, "backoff_ms", backoff.Milliseconds())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

func (n *Notifier) listenOnce(ctx context.Context, deliver func(services.Event), connected func()) error {
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries LISTEN state: never return it to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	for {
		note, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var e services.Event
		if err := json.Unmarshal([]byte(note.Payload), &e); err != nil {
			n.log.Warn("event listener: bad payload", "err", err)
			continue
		}
		if e.Origin == n.origin {
			continue // delivered locally when published
		}
		deliver(e)
	}
}
