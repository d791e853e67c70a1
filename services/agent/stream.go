package agent

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
)

// deltaStream coalesces streamed answer text into events of at most
// ~50 ms or 1 KiB, so clients see the answer grow without one event per
// token. The text is transient: only the final answer is stored.
type deltaStream struct {
	ctx  context.Context
	pub  services.Publisher
	run  services.Run
	buf  strings.Builder
	last time.Time
	// all is every text of the call so far: what the owner has seen, kept
	// when the call is cut short (/stop).
	all strings.Builder
}

func newDeltaStream(ctx context.Context, pub services.Publisher, run services.Run) *deltaStream {
	return &deltaStream{ctx: ctx, pub: pub, run: run, last: time.Now()}
}

func (d *deltaStream) add(text string) {
	d.buf.WriteString(text)
	d.all.WriteString(text)
	if d.buf.Len() >= 1024 || time.Since(d.last) >= 50*time.Millisecond {
		d.flush()
	}
}

func (d *deltaStream) flush() {
	if d.pub == nil || d.buf.Len() == 0 {
		return
	}
	data, _ := json.Marshal(map[string]string{"text": d.buf.String()})
	d.buf.Reset()
	d.last = time.Now()
	_ = d.pub.Publish(d.ctx, services.Event{Type: services.EventDelta, TimelineScope: d.run.TimelineScope, RunID: d.run.ID, Data: data})
}
