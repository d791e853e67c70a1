package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/services"
)

// deltaInterval and deltaBytes bound how long and how much streamed text
// waits to be sent together.
const (
	deltaInterval = 50 * time.Millisecond
	deltaBytes    = 1024
)

// deltaStream coalesces streamed answer text into events of at most
// ~50 ms or 1 KiB, so clients see the answer grow without one event per
// token. A call's first text goes out at once: the owner sees the answer
// begin when the model begins it, even when the model then pauses; later
// text waits at most the interval (a timer sends what waits when no more
// text comes). The text is transient: only the final answer is stored.
type deltaStream struct {
	ctx context.Context
	pub services.Publisher
	run services.Run

	mu  sync.Mutex
	buf strings.Builder
	// last is when the last event went out; zero until the first, so the
	// first text is sent at once.
	last time.Time
	// timer sends what waits once the interval has passed.
	timer *time.Timer
	// all is every text of the call so far: what the owner has seen, kept
	// when the call is cut short (/stop). Written by add only.
	all strings.Builder
}

func newDeltaStream(ctx context.Context, pub services.Publisher, run services.Run) *deltaStream {
	return &deltaStream{ctx: ctx, pub: pub, run: run}
}

func (d *deltaStream) add(text string) {
	d.all.WriteString(text)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buf.WriteString(text)
	wait := deltaInterval - time.Since(d.last)
	if d.buf.Len() >= deltaBytes || wait <= 0 {
		d.flushLocked()
		return
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.flush)
	}
}

// flush sends what waits; the loop calls it when the call ends.
func (d *deltaStream) flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flushLocked()
}

func (d *deltaStream) flushLocked() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.pub == nil || d.buf.Len() == 0 {
		return
	}
	data, _ := json.Marshal(map[string]string{"text": d.buf.String()})
	d.buf.Reset()
	d.last = time.Now()
	_ = d.pub.Publish(d.ctx, services.Event{Type: services.EventDelta, TimelineScope: d.run.TimelineScope, RunID: d.run.ID, Data: data})
}
