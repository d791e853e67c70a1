package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// sse writes one completion's server-sent events. Headers and the role
// chunk go with the first event, so a failure before any output still gets
// its error status.
type sse struct {
	resp    *echo.Response
	comp    *completion
	started bool
}

// chunk is one chat.completion.chunk of the completion with delta and,
// in the last one, the finish reason.
func (s *sse) chunk(delta Delta, finish *string) Chunk {
	return Chunk{ID: s.comp.id, Object: "chat.completion.chunk", Created: s.comp.created, Model: ModelID,
		Choices: []ChunkChoice{{Delta: delta, FinishReason: finish}}}
}

// text is a chunk of text.
func (s *sse) text(t string) Chunk { return s.chunk(Delta{Content: &t}, nil) }

// send writes one data event, after the headers and the role chunk when it
// is the first.
func (s *sse) send(v any) error {
	if !s.started {
		s.started = true
		h := s.resp.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.resp.WriteHeader(http.StatusOK)
		empty := ""
		if err := writeSSE(s.resp, "", s.chunk(Delta{Role: "assistant", Content: &empty}, nil)); err != nil {
			return err
		}
	}
	return writeSSE(s.resp, "", v)
}

// stream answers with server-sent chat.completion.chunk events: the role,
// the run's streamed text as it comes, the rest of the final answer, a
// chunk with finish_reason "stop", optionally a usage chunk, and "data:
// [DONE]". A failure before any output is an error with its status; a
// failure after it is an `event: error` whose data is OpenAI's error
// object, which the SDKs raise as an error, and no [DONE].
func (ch *Channel) stream(ctx context.Context, comp *completion) error {
	s := &sse{resp: comp.c.Response(), comp: comp}
	var sent strings.Builder
	comp.waiter.onDelta = func(text string) error {
		sent.WriteString(text)
		return s.send(s.text(text))
	}
	res, err := comp.waiter.wait(ctx, comp.sub)
	if err != nil {
		if !s.started {
			return ch.waitError(comp.c, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return ch.streamFail(s, &apiFail{status: http.StatusGatewayTimeout, code: "timeout",
				msg: "no answer from the agent within " + ch.cfg.TurnTimeout.String() + "; the answer will appear in the timeline"})
		}
		return nil
	}
	if f := runFailure(res); f != nil {
		return ch.streamFail(s, f)
	}
	final, err := checkAnswerFormat(comp.req, res)
	if err != nil {
		var f *apiFail
		errors.As(err, &f)
		return ch.streamFail(s, f)
	}
	// Text streamed by earlier model calls of the run (before a tool call)
	// is not part of the final answer: then the answer follows in full.
	// (A JSON answer's fence, if any, was streamed as the model wrote it.)
	rest := final
	if streamed := sent.String(); streamed != "" {
		if after, ok := strings.CutPrefix(res.content, streamed); ok {
			rest = after
		} else {
			rest = "\n\n" + res.content
		}
	}
	if rest != "" || !s.started {
		if err := s.send(s.text(rest)); err != nil {
			return nil
		}
	}
	finish := finishReason(res)
	if err := s.send(s.chunk(Delta{}, &finish)); err != nil {
		return nil
	}
	if comp.req.IncludeUsage {
		u := ch.usageOf(context.WithoutCancel(ctx), res.runID)
		_ = s.send(Chunk{ID: comp.id, Object: "chat.completion.chunk", Created: comp.created, Model: ModelID,
			Choices: []ChunkChoice{}, Usage: &u})
	}
	_, _ = io.WriteString(s.resp, "data: [DONE]\n\n")
	s.resp.Flush()
	return nil
}

// streamFail answers a failure: its status and error before any output, an
// `event: error` after it.
func (ch *Channel) streamFail(s *sse, f *apiFail) error {
	if !s.started {
		return ch.fail(s.comp.c, f)
	}
	_ = writeSSE(s.resp, "error", f.body())
	return nil
}

// writeSSE writes one event (named event, or a plain data event) and
// flushes it.
func writeSSE(resp *echo.Response, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var buf []byte
	if event != "" {
		buf = append(buf, "event: "+event+"\n"...)
	}
	buf = append(append(append(buf, "data: "...), b...), '\n', '\n')
	if _, err := resp.Write(buf); err != nil {
		return err
	}
	resp.Flush()
	return nil
}
