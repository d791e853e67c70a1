package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	v1 "github.com/switchboard/switchboard/channels/openai"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// apiInstance is a whole stack (database, hub, agent on the fake model,
// queue) behind the web server, with the OpenAI-compatible channel wired.
type apiInstance struct {
	URL   string
	Store *repository.Store
	Model *llmtest.Server
}

func newAPIInstance(t *testing.T, turnTimeout time.Duration) *apiInstance {
	t.Helper()
	pool := dbtest.PoolFor(t, newSchemaURL(t))
	model := llmtest.NewServer(t)
	in := newStack(t, pool, stackOpts{model: model, turnTimeout: turnTimeout})
	return &apiInstance{URL: in.URL, Store: in.Store, Model: model}
}

func (in *apiInstance) client(token string) openai.Client {
	return openai.NewClient(option.WithBaseURL(in.URL+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0))
}

// timeline returns the visible rows of a timeline.
func (in *apiInstance) timeline(t *testing.T, tl string) []services.Message {
	t.Helper()
	msgs, err := in.Store.ListTimeline(context.Background(), services.TimelineQuery{TimelineScope: tl, BeforeID: 1<<63 - 1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestAPIChatCompletion(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	cl := in.client(testToken)
	ctx := context.Background()
	resp, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: v1.ModelID,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("ignored: the server keeps the history"),
			openai.UserMessage("an earlier question, ignored"),
			openai.AssistantMessage("an earlier answer, ignored"),
			openai.UserMessage("hello over the API"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "echo: hello over the API" || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer: %+v", resp.Choices)
	}
	if resp.Object != "chat.completion" || resp.Model != v1.ModelID || !strings.HasPrefix(resp.ID, "chatcmpl-") {
		t.Fatalf("envelope: id %q object %q model %q", resp.ID, resp.Object, resp.Model)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Fatalf("usage: %+v", resp.Usage)
	}
	// Only the last user message is stored, in the owner's timeline, as
	// channel api; the answer follows it.
	msgs := in.timeline(t, services.DefaultTimeline)
	if len(msgs) != 2 || msgs[0].Source != services.SourceAPI || msgs[0].Content != "hello over the API" ||
		msgs[1].Role != services.RoleAssistant || msgs[1].Content != "echo: hello over the API" {
		t.Fatalf("timeline: %+v", msgs)
	}
	if got := in.Model.RequestCount(); got != 1 {
		t.Fatalf("model calls: %d", got)
	}
}

func TestAPIUserSelectsTimeline(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	cl := in.client(testToken)
	for _, user := range []string{"alice", "bob"} {
		resp, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: v1.ModelID, User: openai.String(user),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi from " + user)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != "echo: hi from "+user {
			t.Fatalf("%s: %q", user, got)
		}
	}
	for _, user := range []string{"alice", "bob"} {
		msgs := in.timeline(t, "api:"+user)
		if len(msgs) != 2 || msgs[0].Content != "hi from "+user {
			t.Fatalf("timeline api:%s: %+v", user, msgs)
		}
	}
	if msgs := in.timeline(t, services.DefaultTimeline); len(msgs) != 0 {
		t.Fatalf("owner's timeline got %d rows", len(msgs))
	}
}

func TestAPITimelineNames(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		user *string
		want string
	}{
		{nil, "global"},
		{s(""), "global"},
		{s("alice"), "api:alice"},
		{s("a.b_c-d@example.org"), "api:a.b_c-d@example.org"},
		{s(strings.Repeat("x", 64)), "api:" + strings.Repeat("x", 64)},
	} {
		if got := v1.Timeline("global", c.user); got != c.want {
			t.Errorf("%v: %q, want %q", c.user, got, c.want)
		}
	}
	// Anything else maps to a stable hashed name, distinct per value.
	a, b := v1.Timeline("global", s("Ann Smith")), v1.Timeline("global", s("Ann_Smith"))
	if !strings.HasPrefix(a, "api:h-") || len(a) != len("api:h-")+16 || a == b || a != v1.Timeline("global", s("Ann Smith")) {
		t.Fatalf("hashed names: %q %q", a, b)
	}
	if long := v1.Timeline("global", s(strings.Repeat("x", 65))); !strings.HasPrefix(long, "api:h-") {
		t.Fatalf("65 chars: %q", long)
	}
}

func TestAPIChatCompletionStream(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	// Fragments 80 ms apart: each becomes its own delta event (coalesced
	// every 50 ms), so the answer arrives in several chunks.
	answer := "one two three four five"
	in.Model.Enqueue(llmtest.Reply{Text: answer, FragmentDelay: 80 * time.Millisecond})
	cl := in.client(testToken)
	stream := cl.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         v1.ModelID,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count to five")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var text strings.Builder
	contentChunks, finish := 0, ""
	var usage openai.CompletionUsage
	for stream.Next() {
		ch := stream.Current()
		if ch.Object != "chat.completion.chunk" {
			t.Fatalf("object %q", ch.Object)
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				contentChunks++
				text.WriteString(c.Delta.Content)
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != answer || finish != "stop" {
		t.Fatalf("streamed %q (finish %q), want %q", text.String(), finish, answer)
	}
	if contentChunks < 3 {
		t.Fatalf("answer came in %d chunks; want it streamed in several", contentChunks)
	}
	if usage.PromptTokens == 0 {
		t.Fatalf("no usage chunk")
	}
	msgs := in.timeline(t, services.DefaultTimeline)
	if len(msgs) != 2 || msgs[1].Content != answer {
		t.Fatalf("timeline: %+v", msgs)
	}
}

// A command is answered at once, without a run.
func TestAPICommand(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	cl := in.client(testToken)
	resp, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("/status")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Choices[0].Message.Content, "Model:") {
		t.Fatalf("status answer: %q", resp.Choices[0].Message.Content)
	}
}

// A model failure is an error in OpenAI's shape with a status that fits
// it, never a 200 whose content is the notice; the notice stays in the
// timeline.
func TestAPIModelFailureStatus(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	for _, c := range []struct {
		reply      llmtest.Reply
		status     int
		code       string
		retryAfter string
	}{
		{llmtest.Status(500, ""), 502, "model_error", ""},
		{llmtest.Status(429, "7"), 429, "rate_limit_exceeded", "7"},
		{llmtest.Status(401, ""), 502, "model_auth", ""},
		{llmtest.Status(404, ""), 503, "model_unavailable", ""},
		{llmtest.Status(400, ""), 502, "model_rejected", ""},
	} {
		in.Model.Enqueue(c.reply)
		resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken,
			`{"model":"switchboard","messages":[{"role":"user","content":"fail please"}]}`)
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != c.status || e.Error.Code != c.code ||
			e.Error.Message == "" || strings.HasPrefix(e.Error.Message, "I could not answer") {
			t.Errorf("model %d: %d %s; want %d %s", c.reply.Status, resp.StatusCode, body, c.status, c.code)
		}
		if got := resp.Header.Get("Retry-After"); got != c.retryAfter {
			t.Errorf("model %d: Retry-After %q, want %q", c.reply.Status, got, c.retryAfter)
		}
	}
	// Through the official client: the error classes it has for them.
	in.Model.Enqueue(llmtest.Status(503, ""))
	cl := in.client(testToken)
	_, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("fail again")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Type != "server_error" || apiErr.Code != "model_error" {
		t.Fatalf("client: %v", err)
	}
	// Every failure left its question and its notice in the timeline.
	msgs := in.timeline(t, services.DefaultTimeline)
	if len(msgs) != 12 || !strings.HasPrefix(msgs[11].Content, "I could not answer") {
		t.Fatalf("timeline: %d rows", len(msgs))
	}
}

// A failure after the stream started is an error event the SDK raises.
func TestAPIStreamFailureEvent(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	// The first reply streams two words, then its connection is cut: the
	// agent does not retry an answer that had started.
	in.Model.Enqueue(llmtest.Reply{Text: "one two three four", CutAfter: 2, FragmentDelay: 80 * time.Millisecond})
	cl := in.client(testToken)
	stream := cl.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("break off")},
	})
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "model_error") || !strings.Contains(err.Error(), "broke off") {
		t.Fatalf("stream error: %v (text %q)", err, text.String())
	}
	if text.String() != "one two " {
		t.Fatalf("streamed before the error: %q", text.String())
	}
}

func TestAPITimeout(t *testing.T) {
	t.Parallel()
	// The limit covers storing the question too: on a loaded machine 300 ms
	// was sometimes spent before the post committed (a 503 instead).
	in := newAPIInstance(t, 3*time.Second)
	in.Model.Enqueue(llmtest.Reply{Text: "late", Delay: 30 * time.Second})
	resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken,
		`{"model":"switchboard","stream":true,"messages":[{"role":"user","content":"slow"}]}`)
	if resp.StatusCode != 504 || !strings.Contains(body, `"type":"server_error"`) || !strings.Contains(body, "no answer from the agent within 3s") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestAPIModels(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	cl := in.client(testToken)
	page, err := cl.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != v1.ModelID {
		t.Fatalf("models: %+v", page.Data)
	}
	m, err := cl.Models.Get(context.Background(), v1.ModelID)
	if err != nil || m.ID != v1.ModelID {
		t.Fatalf("get: %v %+v", err, m)
	}
	_, err = cl.Models.Get(context.Background(), "gpt-4o")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestAPIRefusals(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	// A wrong token: 401 in OpenAI's shape, through the official client.
	bad := in.client("wrong-token-wrong-token-000")
	_, err := bad.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" || apiErr.Type != "authentication_error" {
		t.Fatalf("bad token: %v", err)
	}
	good := in.client(testToken)
	_, err = good.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "messages is empty") {
		t.Fatalf("empty messages: %v", err)
	}
	for _, c := range []struct{ body, want string }{
		{`{"model":"switchboard","messages":[{"role":"user","content":"hi"}`, "invalid JSON"},
		{``, "request body is empty"},
		{`{"model":"switchboard","messages":"hi"}`, `field messages: want an array, got JSON string`},
		{`{"model":"switchboard","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, `field stream: want true or false`},
		{`{"messages":[{"role":"user","content":"hi"}]}`, "model is required"},
		{`{"model":"switchboard","messages":[]}`, "messages is empty"},
		{`{"model":"switchboard","messages":[{"role":"system","content":"only a system prompt"}]}`, `no message with role \"user\"`},
		{`{"model":"switchboard","messages":[{"role":"user","content":"   "}]}`, "messages[0] (the last user message) has no text"},
		{`{"model":"switchboard","messages":[{"role":"user","content":42}]}`, "messages[0].content: want a string or an array"},
		{`{"model":"switchboard","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "does not read images (the server's LLM_IMAGES is 0)"},
	} {
		resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken, c.body)
		if resp.StatusCode != 400 || !strings.Contains(body, c.want) || !strings.Contains(body, `"type":"invalid_request_error"`) {
			t.Errorf("%s: %d %s; want 400 naming %q", c.body, resp.StatusCode, body, c.want)
		}
	}
	// Content parts: the text parts are the message.
	resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken,
		`{"model":"switchboard","messages":[{"role":"user","content":[{"type":"text","text":"part one"},{"type":"text","text":"part two"}]}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `echo: part one\npart two`) {
		t.Fatalf("parts: %d %s", resp.StatusCode, body)
	}
	// Without a token: 401, OpenAI's shape; nothing was stored by refusals.
	resp, body = do(t, "GET", in.URL+"/v1/models", "", "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"code":"invalid_api_key"`) {
		t.Fatalf("no token: %d %s", resp.StatusCode, body)
	}
	if msgs := in.timeline(t, services.DefaultTimeline); len(msgs) != 2 {
		t.Fatalf("stored %d rows; want the one accepted message and its answer", len(msgs))
	}
}
