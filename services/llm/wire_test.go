package llm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
)

// chunkedReader returns its text a few bytes per Read, so that lines and
// events arrive split across reads as they do over a network.
type chunkedReader struct {
	s string
	n int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	k := min(r.n, len(r.s), len(p))
	copy(p, r.s[:k])
	r.s = r.s[k:]
	return k, nil
}

func readEvents(t *testing.T, text string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, n := range []int{1, 3, 4096} {
		s := newSSEReader(&chunkedReader{s: text, n: n})
		var got []sseEvent
		for {
			ev, ok := s.next()
			if !ok {
				break
			}
			got = append(got, sseEvent{ev.typ, append([]byte(nil), ev.data...)})
		}
		if s.err != nil {
			t.Fatalf("read %d bytes at a time: %v", n, s.err)
		}
		if out != nil && len(got) != len(out) {
			t.Fatalf("read %d bytes at a time: %d events, want %d", n, len(got), len(out))
		}
		out = got
	}
	return out
}

// Events are read whole however the bytes arrive: CRLF and LF lines,
// comments (keep-alives) skipped, several data lines joined by newlines,
// "data:" with or without its space, unknown fields ignored, and a last
// event without its empty line still delivered.
func TestSSEReader(t *testing.T) {
	text := ": keep-alive\n\n" +
		"event: message_start\r\ndata: {\"a\":1}\r\n\r\n" +
		": ping\n" +
		"id: 7\nretry: 100\ndata:{\"b\":\ndata: 2}\n\n\n\n" +
		"data: [DONE]"
	got := readEvents(t, text)
	want := []sseEvent{{"message_start", []byte(`{"a":1}`)}, {"", []byte("{\"b\":\n2}")}, {"", []byte("[DONE]")}}
	if len(got) != len(want) {
		t.Fatalf("got %d events %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].typ != want[i].typ || string(got[i].data) != string(want[i].data) {
			t.Errorf("event %d = %q %q, want %q %q", i, got[i].typ, got[i].data, want[i].typ, want[i].data)
		}
	}
}

// rawServer answers every request with status and body as they are.
func rawServer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func rawComplete(t *testing.T, api, body string) (*Response, string, error) {
	t.Helper()
	u := rawServer(t, http.StatusOK, body)
	var p Provider
	cfg := Config{Model: "m", BaseURL: u}
	switch api {
	case ProviderOpenAI:
		p, _ = NewOpenAI(cfg)
	default:
		p, _ = NewAnthropic(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var text strings.Builder
	resp, err := p.Complete(ctx, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, func(s string) { text.WriteString(s) })
	return resp, text.String(), err
}

func providerErr(t *testing.T, err error) *ProviderError {
	t.Helper()
	var pe *ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *ProviderError", err)
	}
	return pe
}

func TestOpenAIStreamEdges(t *testing.T) {
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	t.Run("tool calls in pieces, usage, comments, done", func(t *testing.T) {
		body := ": keep-alive\n\n" +
			chunk(`{"model":"m-1","choices":[{"index":0,"delta":{"content":"Hel"}}]}`) +
			chunk(`{"choices":[{"index":0,"delta":{"content":"lo"}}]}`) +
			chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read","arguments":"{\"pa"}}]}}]}`) +
			chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":1}"}},{"index":1,"id":"c2","function":{"name":"now","arguments":""}}]}}]}`) +
			chunk(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`) +
			chunk(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}`) +
			chunk("[DONE]") + chunk(`{"not":"read after done"}`)
		resp, text, err := rawComplete(t, ProviderOpenAI, body)
		if err != nil {
			t.Fatal(err)
		}
		if text != "Hello" || resp.Text != "Hello" || resp.Model != "m-1" || resp.StopReason != StopToolCalls {
			t.Errorf("text %q / %q, model %q, stop %q", text, resp.Text, resp.Model, resp.StopReason)
		}
		if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "c1" || string(resp.ToolCalls[0].Arguments) != `{"path":1}` ||
			resp.ToolCalls[1].Name != "now" || string(resp.ToolCalls[1].Arguments) != "{}" {
			t.Errorf("tool calls = %+v", resp.ToolCalls)
		}
		if resp.Usage != (services.TokenUsage{PromptTokens: 10, CompletionTokens: 3, CachedTokens: 8}) {
			t.Errorf("usage = %+v", resp.Usage)
		}
	})
	t.Run("error event", func(t *testing.T) {
		body := chunk(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`) + chunk(`{"error":{"message":"overloaded","type":"server_error"}}`)
		_, _, err := rawComplete(t, ProviderOpenAI, body)
		pe := providerErr(t, err)
		if !errors.Is(err, errStreamFailed) || !pe.Retryable || !strings.Contains(err.Error(), "overloaded") {
			t.Errorf("err = %v (retryable %v), want a retryable mid-stream failure naming the message", err, pe.Retryable)
		}
	})
	t.Run("malformed JSON", func(t *testing.T) {
		_, _, err := rawComplete(t, ProviderOpenAI, chunk(`{"choices":[{"index":0,"delta":{"content":"a"}`))
		if !errors.Is(err, errBadReply) || !strings.Contains(err.Error(), "could not be understood") {
			t.Errorf("err = %v, want errBadReply", err)
		}
	})
	t.Run("no finish reason", func(t *testing.T) {
		_, _, err := rawComplete(t, ProviderOpenAI, chunk(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`)+chunk("[DONE]"))
		if !errors.Is(err, errStreamTruncated) {
			t.Errorf("err = %v, want errStreamTruncated", err)
		}
	})
}

func TestAnthropicStreamEdges(t *testing.T) {
	event := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	start := event("message_start", `{"type":"message_start","message":{"model":"claude-x","content":[],"usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7,"output_tokens":1}}}`)
	t.Run("text, tool use in pieces, ping, usage", func(t *testing.T) {
		body := start + event("ping", `{"type":"ping"}`) + ": comment\n\n" +
			event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi "}}`) +
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"there"}}`) +
			event("content_block_stop", `{"type":"content_block_stop","index":0}`) +
			event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"read","input":{}}}`) +
			event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`) +
			event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"a\"}"}}`) +
			event("content_block_stop", `{"type":"content_block_stop","index":1}`) +
			event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`) +
			event("message_stop", `{"type":"message_stop"}`)
		resp, text, err := rawComplete(t, ProviderAnthropic, body)
		if err != nil {
			t.Fatal(err)
		}
		if text != "Hi there" || resp.Text != "Hi there" || resp.Model != "claude-x" || resp.StopReason != StopToolCalls {
			t.Errorf("text %q / %q, model %q, stop %q", text, resp.Text, resp.Model, resp.StopReason)
		}
		if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "t1" || string(resp.ToolCalls[0].Arguments) != `{"path":"a"}` {
			t.Errorf("tool calls = %+v", resp.ToolCalls)
		}
		want := services.TokenUsage{PromptTokens: 112, CompletionTokens: 9, CachedTokens: 100, CacheWriteTokens: 7}
		if resp.Usage != want {
			t.Errorf("usage = %+v, want %+v", resp.Usage, want)
		}
	})
	t.Run("malformed tool input is kept for the model", func(t *testing.T) {
		body := start + event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"read","input":{}}}`) +
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`) +
			event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":2}}`) +
			event("message_stop", `{"type":"message_stop"}`)
		resp, _, err := rawComplete(t, ProviderAnthropic, body)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != "{}" || resp.ToolCalls[0].Malformed != `{"path":` {
			t.Errorf("tool calls = %+v, want {} with the raw input in Malformed", resp.ToolCalls)
		}
	})
	for name, ev := range map[string]string{
		"error event":                event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		"error event without a name": "data: " + `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := rawComplete(t, ProviderAnthropic, start+ev)
			pe := providerErr(t, err)
			if !errors.Is(err, errStreamFailed) || !pe.Retryable || !strings.Contains(err.Error(), "overloaded_error Overloaded") {
				t.Errorf("err = %v (retryable %v), want a retryable mid-stream failure naming type and message", err, pe.Retryable)
			}
		})
	}
	t.Run("malformed JSON", func(t *testing.T) {
		_, _, err := rawComplete(t, ProviderAnthropic, start+event("content_block_start", `{"type":"content_block_start","index":0,`))
		if !errors.Is(err, errBadReply) {
			t.Errorf("err = %v, want errBadReply", err)
		}
	})
	t.Run("delta for a block never started", func(t *testing.T) {
		_, _, err := rawComplete(t, ProviderAnthropic, start+event("content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}`))
		if !errors.Is(err, errBadReply) {
			t.Errorf("err = %v, want errBadReply", err)
		}
	})
	t.Run("no message_stop", func(t *testing.T) {
		_, _, err := rawComplete(t, ProviderAnthropic, start)
		if !errors.Is(err, errStreamTruncated) {
			t.Errorf("err = %v, want errStreamTruncated", err)
		}
	})
}

// An error response's message and Retry-After reach the caller, in both
// of the error shapes servers use.
func TestErrorResponses(t *testing.T) {
	for _, c := range []struct {
		api, body, want string
	}{
		{ProviderOpenAI, `{"error":{"message":"Rate limit reached","type":"requests"}}`, "Rate limit reached"},
		{ProviderAnthropic, `{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}`, "Slow down"},
		{ProviderOpenAI, `{"error":"plain string"}`, "plain string"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, c.body)
		}))
		cfg := Config{Model: "m", BaseURL: srv.URL}
		var p Provider
		if c.api == ProviderOpenAI {
			p, _ = NewOpenAI(cfg)
		} else {
			p, _ = NewAnthropic(cfg)
		}
		_, err := p.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, nil)
		srv.Close()
		pe := providerErr(t, err)
		if pe.StatusCode != 429 || !pe.Retryable || pe.RetryAfter != 2*time.Second || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: err = %v (%+v), want a retryable 429 after 2s naming %q", c.api, c.body, err, pe, c.want)
		}
	}
}
