package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// capture is a fresh request capture when requests are kept
// (AGENT_REQUEST_RETENTION > 0), nil otherwise.
func (s *Service) capture() *llm.Capture {
	if s.opts.RequestRetention <= 0 {
		return nil
	}
	return &llm.Capture{Encode: Gzip}
}

// appendCallStep records a model call's step (or its error) and, when
// captured, the exact request body the provider sent, gzip-compressed, in
// the same statement.
func (s *Service) appendCallStep(ctx context.Context, l loopSpec, kind services.StepKind, payload json.RawMessage, c *llm.Capture) (services.Step, error) {
	return s.appendCallStepIn(ctx, s.opts.Store, l, kind, payload, c)
}

// appendCallStepIn is appendCallStep in st: the Store, or a Tx the step
// joins.
func (s *Service) appendCallStepIn(ctx context.Context, st services.Store, l loopSpec, kind services.StepKind, payload json.RawMessage, c *llm.Capture) (services.Step, error) {
	if c == nil {
		return st.AppendStep(ctx, l.stepRun(), kind, payload)
	}
	body, url := c.Body()
	if body == nil {
		// Nothing went on the wire (the offline model, a refused request).
		return st.AppendStep(ctx, l.stepRun(), kind, payload)
	}
	req := services.RunRequest{
		TimelineScope: l.call.TimelineScope, ContextScope: l.call.ContextScope,
		Provider: l.provider.Name(), Model: l.provider.Model(), URL: url, Bytes: len(body), Gzip: c.Encoded(),
	}
	return st.AppendStepWithRequest(ctx, l.stepRun(), kind, payload, req)
}

// gzipWriters are reused: a new gzip.Writer allocates most of a megabyte.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// Gzip compresses body with a pooled writer, at the fastest level: on a
// 117 KB request body it took 0.33 ms for 8.2 KB where the default level
// took 2.3 ms for 7.8 KB.
func Gzip(body []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(body) / 4)
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, _ = zw.Write(body)
	_ = zw.Close()
	gzipWriters.Put(zw)
	return buf.Bytes()
}

// pruneRequests deletes stored requests older than the retention, at most
// once an hour per process.
func (s *Service) pruneRequests(ctx context.Context) {
	if s.opts.RequestRetention <= 0 {
		return
	}
	now := time.Now()
	last := s.lastPrune.Load()
	if now.Unix()-last < 3600 || !s.lastPrune.CompareAndSwap(last, now.Unix()) {
		return
	}
	n, err := s.opts.Store.PruneRunRequests(ctx, now.Add(-s.opts.RequestRetention))
	if err != nil {
		s.log.Warn("prune stored model requests", "err", err)
		return
	}
	if n > 0 {
		s.log.Info("pruned stored model requests", "deleted", n, "retention", s.opts.RequestRetention.String())
	}
}
