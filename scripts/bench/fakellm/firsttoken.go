package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// stampPrefix begins the first token of a -first-pause answer: "t=<unix
// ns> ", the wall clock just before the fake wrote that chunk. A client on
// the same machine subtracts it from the time the first delta reached it
// (scripts/bench/wsdelta).
const stampPrefix = "t="

// firstToken answers streamed OpenAI chat completions as a model that
// sends its first token at once and the rest after a pause: the role chunk,
// a content chunk "t=<unix ns> " (flushed), the pause, then the rest of the
// answer, the finish chunk, the usage chunk when asked for, and [DONE].
// Every other request (not streamed, Anthropic, transcriptions) goes to
// next, the ordinary fake.
type firstToken struct {
	pause time.Duration
	next  http.Handler
	ids   atomic.Int64
}

func newFirstToken(pause time.Duration, inner string) (*firstToken, error) {
	u, err := url.Parse(inner)
	if err != nil {
		return nil, err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1 // the inner fake's streams pass through as written
	return &firstToken{pause: pause, next: p}, nil
}

func (f *firstToken) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil || !req.Stream {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		f.next.ServeHTTP(w, r)
		return
	}
	id := fmt.Sprintf("chatcmpl-ft%d", f.ids.Add(1))
	created := time.Now().Unix()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	writeSSE(w, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	now := time.Now().UnixNano()
	first := stampPrefix + strconv.FormatInt(now, 10) + " "
	writeSSE(w, chunk(map[string]any{"content": first}, nil))
	select {
	case <-time.After(f.pause):
	case <-r.Context().Done():
		return
	}
	rest := "and the rest of the answer."
	for _, word := range strings.SplitAfter(rest, " ") {
		writeSSE(w, chunk(map[string]any{"content": word}, nil))
	}
	writeSSE(w, chunk(map[string]any{}, "stop"))
	if req.StreamOptions.IncludeUsage {
		prompt, completion := max(1, len(body)/4), max(1, (len(first)+len(rest))/4)
		writeSSE(w, map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
				"prompt_tokens_details": map[string]any{"cached_tokens": 0}},
		})
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// writeSSE writes one data-only server-sent event and flushes it.
func writeSSE(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}
