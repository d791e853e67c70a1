package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// apis are the two real providers, exercised against the fake server.
var apis = []string{llm.ProviderOpenAI, llm.ProviderAnthropic}

// setup returns a provider of kind api talking to a fresh fake server, with
// retries as given and millisecond backoffs.
func setup(t *testing.T, api string, retries int) (llm.Provider, *llmtest.Server) {
	t.Helper()
	srv := llmtest.NewServer(t)
	return newProvider(t, api, srv, llm.Config{MaxRetries: retries}), srv
}

// newProvider returns a provider of kind api with cfg's settings, talking
// to srv unless cfg names a BaseURL (srv may then be nil).
func newProvider(t testing.TB, api string, srv *llmtest.Server, cfg llm.Config) llm.Provider {
	t.Helper()
	cfg.Provider = api
	cfg.Model = "test-model"
	cfg.APIKey = "test-key"
	cfg.RetryBaseDelay = time.Millisecond
	if cfg.BaseURL == "" {
		cfg.BaseURL = srv.OpenAIBaseURL()
		if api == llm.ProviderAnthropic {
			cfg.BaseURL = srv.AnthropicBaseURL()
		}
	}
	p, err := llm.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// complete calls p, streaming when stream is set, and returns the deltas.
func complete(t *testing.T, p llm.Provider, req llm.Request, stream bool) (*llm.Response, []string, error) {
	t.Helper()
	var deltas []string
	var onDelta func(string)
	if stream {
		onDelta = func(s string) { deltas = append(deltas, s) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := p.Complete(ctx, req, onDelta)
	return resp, deltas, err
}

func mode(stream bool) string {
	if stream {
		return "stream"
	}
	return "plain"
}

func userRequest(text string) llm.Request {
	return llm.Request{System: "You are Switchboard.", Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}
}

func TestPlainAnswer(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			t.Run(api+"/"+mode(stream), func(t *testing.T) {
				t.Parallel()
				p, srv := setup(t, api, 0)
				want := "Hello there, owner. All systems nominal."
				srv.Enqueue(llmtest.Reply{Text: want, Usage: llmtest.Usage{PromptTokens: 120, CompletionTokens: 9, CachedTokens: 100, CacheWriteTokens: 20}})

				resp, deltas, err := complete(t, p, userRequest("status?"), stream)
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if resp.Text != want {
					t.Errorf("Text = %q, want %q", resp.Text, want)
				}
				if stream {
					if len(deltas) < 2 {
						t.Errorf("got %d deltas, want several", len(deltas))
					}
					if got := strings.Join(deltas, ""); got != want {
						t.Errorf("deltas join to %q, want %q", got, want)
					}
				} else if len(deltas) != 0 {
					t.Errorf("got deltas without streaming: %q", deltas)
				}
				if resp.StopReason != llm.StopEnd {
					t.Errorf("StopReason = %q, want %q", resp.StopReason, llm.StopEnd)
				}
				if resp.Model != "test-model" {
					t.Errorf("Model = %q", resp.Model)
				}
				wantUsage := services.TokenUsage{PromptTokens: 120, CompletionTokens: 9, CachedTokens: 100}
				if api == llm.ProviderAnthropic {
					wantUsage.CacheWriteTokens = 20 // OpenAI does not report cache writes
				}
				if resp.Usage != wantUsage {
					t.Errorf("Usage = %+v, want %+v", resp.Usage, wantUsage)
				}

				reqs := srv.Requests()
				if len(reqs) != 1 {
					t.Fatalf("server got %d requests, want 1", len(reqs))
				}
				r := reqs[0]
				if r.Stream != stream || r.Model != "test-model" || r.LastMessage != "status?" {
					t.Errorf("request: stream=%v model=%q last=%q", r.Stream, r.Model, r.LastMessage)
				}
				if !strings.Contains(string(r.Body), "You are Switchboard.") {
					t.Errorf("system prompt missing from body: %s", r.Body)
				}
				if api == llm.ProviderOpenAI && stream && !strings.Contains(string(r.Body), `"include_usage":true`) {
					t.Errorf("stream_options.include_usage not sent: %s", r.Body)
				}
				if api == llm.ProviderAnthropic && r.Header.Get("X-Api-Key") != "test-key" {
					t.Errorf("x-api-key = %q", r.Header.Get("X-Api-Key"))
				}
				if api == llm.ProviderOpenAI && r.Header.Get("Authorization") != "Bearer test-key" {
					t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
				}
			})
		}
	}
}

var readFileTool = services.ToolSpec{
	Name:        "read_file",
	Description: "Read a file from the workspace.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
}

func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			t.Run(api+"/"+mode(stream), func(t *testing.T) {
				t.Parallel()
				p, srv := setup(t, api, 0)
				srv.Enqueue(llmtest.Reply{Text: "Let me look.", ToolCalls: []llmtest.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.md"}`}}})
				// The second call finds the queue empty: the default reply
				// answers "tool result: <content>".

				req := userRequest("what is in notes.md?")
				req.Tools = []services.ToolSpec{readFileTool}
				first, _, err := complete(t, p, req, stream)
				if err != nil {
					t.Fatalf("first Complete: %v", err)
				}
				if first.StopReason != llm.StopToolCalls {
					t.Errorf("StopReason = %q, want %q", first.StopReason, llm.StopToolCalls)
				}
				if first.Text != "Let me look." {
					t.Errorf("Text = %q", first.Text)
				}
				if len(first.ToolCalls) != 1 {
					t.Fatalf("ToolCalls = %+v, want one", first.ToolCalls)
				}
				call := first.ToolCalls[0]
				var args struct{ Path string }
				if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Path != "notes.md" || call.Name != "read_file" || call.ID == "" {
					t.Fatalf("tool call = %+v (%s), args err %v", call, call.Arguments, err)
				}

				req.Messages = append(req.Messages,
					llm.Message{Role: llm.RoleAssistant, Content: first.Text, ToolCalls: first.ToolCalls},
					llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: "hello from notes"},
				)
				final, deltas, err := complete(t, p, req, stream)
				if err != nil {
					t.Fatalf("second Complete: %v", err)
				}
				if final.Text != "tool result: hello from notes" || final.StopReason != llm.StopEnd || len(final.ToolCalls) != 0 {
					t.Errorf("final = %+v", final)
				}
				if stream && strings.Join(deltas, "") != final.Text {
					t.Errorf("deltas %q do not join to %q", deltas, final.Text)
				}

				reqs := srv.Requests()
				if len(reqs) != 2 {
					t.Fatalf("server got %d requests, want 2", len(reqs))
				}
				checkToolDefinition(t, api, reqs[0].JSON(t))
				checkToolHistory(t, api, reqs[1].JSON(t), call.ID)
			})
		}
	}
}

// checkToolDefinition asserts the tool and its schema were sent natively.
func checkToolDefinition(t *testing.T, api string, body map[string]any) {
	t.Helper()
	tools, _ := body["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools = %v", body["tools"])
	}
	tool := tools[0].(map[string]any)
	var schema map[string]any
	if api == llm.ProviderOpenAI {
		fn := tool["function"].(map[string]any)
		if tool["type"] != "function" || fn["name"] != "read_file" || fn["description"] != readFileTool.Description {
			t.Errorf("tool = %v", tool)
		}
		schema = fn["parameters"].(map[string]any)
	} else {
		if tool["name"] != "read_file" || tool["description"] != readFileTool.Description {
			t.Errorf("tool = %v", tool)
		}
		schema = tool["input_schema"].(map[string]any)
	}
	props, _ := schema["properties"].(map[string]any)
	if schema["type"] != "object" || props["path"] == nil || fmt.Sprint(schema["required"]) != "[path]" {
		t.Errorf("schema = %v", schema)
	}
}

// checkToolHistory asserts the assistant tool call and its result were sent
// back in the API's native shape.
func checkToolHistory(t *testing.T, api string, body map[string]any, callID string) {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	if api == llm.ProviderOpenAI {
		// system, user, assistant with tool_calls, tool
		if len(msgs) != 4 {
			t.Fatalf("messages = %v", msgs)
		}
		asst := msgs[2].(map[string]any)
		calls, _ := asst["tool_calls"].([]any)
		if asst["role"] != "assistant" || len(calls) != 1 || calls[0].(map[string]any)["id"] != callID {
			t.Errorf("assistant message = %v", asst)
		}
		tool := msgs[3].(map[string]any)
		if tool["role"] != "tool" || tool["tool_call_id"] != callID || tool["content"] != "hello from notes" {
			t.Errorf("tool message = %v", tool)
		}
		return
	}
	// user, assistant [text, tool_use], user [tool_result]
	if len(msgs) != 3 {
		t.Fatalf("messages = %v", msgs)
	}
	asst := msgs[1].(map[string]any)
	blocks, _ := asst["content"].([]any)
	if asst["role"] != "assistant" || len(blocks) != 2 {
		t.Fatalf("assistant message = %v", asst)
	}
	use := blocks[1].(map[string]any)
	if use["type"] != "tool_use" || use["id"] != callID || use["input"].(map[string]any)["path"] != "notes.md" {
		t.Errorf("tool_use block = %v", use)
	}
	user := msgs[2].(map[string]any)
	results, _ := user["content"].([]any)
	if user["role"] != "user" || len(results) != 1 {
		t.Fatalf("tool result message = %v", user)
	}
	res := results[0].(map[string]any)
	if res["type"] != "tool_result" || res["tool_use_id"] != callID {
		t.Errorf("tool_result block = %v", res)
	}
}

func TestAnthropicCacheControl(t *testing.T) {
	t.Parallel()
	for _, cache := range []bool{true, false} {
		t.Run(fmt.Sprintf("CacheSystem=%v", cache), func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, llm.ProviderAnthropic, 0)
			req := userRequest("hi")
			req.CacheSystem = cache
			req.Tools = []services.ToolSpec{{Name: "first"}, readFileTool}
			if _, _, err := complete(t, p, req, true); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			r := srv.Requests()[0]
			if !cache {
				if strings.Contains(string(r.Body), "cache_control") {
					t.Errorf("cache_control sent without CacheSystem: %s", r.Body)
				}
				return
			}
			body := r.JSON(t)
			system := body["system"].([]any)[0].(map[string]any)
			if cc, _ := system["cache_control"].(map[string]any); cc["type"] != "ephemeral" || system["text"] != "You are Switchboard." {
				t.Errorf("system block = %v, want cache_control ephemeral", system)
			}
			// Tools precede the system prompt in the cached prefix, so the
			// system block's breakpoint covers them: no breakpoint of their
			// own (the API allows four, the history needs the others).
			for _, tool := range body["tools"].([]any) {
				if _, ok := tool.(map[string]any)["cache_control"]; ok {
					t.Errorf("a tool has a breakpoint besides the system block: %v", tool)
				}
			}
			// The last message is a breakpoint (the next call reads it).
			msgs := body["messages"].([]any)
			last := msgs[len(msgs)-1].(map[string]any)["content"].([]any)
			if cc, _ := last[len(last)-1].(map[string]any)["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
				t.Errorf("last message = %v, want cache_control ephemeral", last)
			}
		})
	}
}

// TestAnthropicCacheBreakpointsOnHistory: the prompt's cache points (the
// ends of the last two past turns) and the last message get breakpoints, at
// most four with the system block's, the oldest message marks dropped
// first; without a system prompt the last tool holds the first one.
func TestAnthropicCacheBreakpointsOnHistory(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, llm.ProviderAnthropic, 0)
	req := llm.Request{System: "You are Switchboard.", CacheSystem: true, Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "one"}, {Role: llm.RoleAssistant, Content: "a1"},
		{Role: llm.RoleUser, Content: "two"}, {Role: llm.RoleAssistant, Content: "a2"},
		{Role: llm.RoleUser, Content: "three"}, {Role: llm.RoleAssistant, Content: "a3"},
		{Role: llm.RoleUser, Content: "four"},
	}, CacheAt: []int{1, 3, 5}}
	if _, _, err := complete(t, p, req, false); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	marked := func(body map[string]any) []string {
		var out []string
		for _, m := range body["messages"].([]any) {
			for _, b := range m.(map[string]any)["content"].([]any) {
				if _, ok := b.(map[string]any)["cache_control"]; ok {
					out = append(out, b.(map[string]any)["text"].(string))
				}
			}
		}
		return out
	}
	body := srv.Requests()[0].JSON(t)
	if got := strings.Join(marked(body), ","); got != "a2,a3,four" {
		t.Errorf("message breakpoints = %s, want a2,a3,four (a1 dropped: four at most with the system block)", got)
	}
	if n := strings.Count(string(srv.Requests()[0].Body), "cache_control"); n != 4 {
		t.Errorf("%d breakpoints, want 4", n)
	}

	req.System, req.Tools, req.CacheAt = "", []services.ToolSpec{{Name: "first"}, readFileTool}, []int{3}
	if _, _, err := complete(t, p, req, false); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	body = srv.Requests()[1].JSON(t)
	tools := body["tools"].([]any)
	if cc, _ := tools[1].(map[string]any)["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
		t.Errorf("without a system prompt the last tool = %v, want cache_control", tools[1])
	}
	if got := strings.Join(marked(body), ","); got != "a2,four" {
		t.Errorf("message breakpoints = %s, want a2,four", got)
	}
}

// TestMalformedToolCall: arguments that are not a JSON object come back
// as a call with {} arguments and the raw text in Malformed (the agent
// returns it to the model as a tool result), not as a failed call.
func TestMalformedToolCall(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			t.Run(api+"/"+mode(stream), func(t *testing.T) {
				t.Parallel()
				p, srv := setup(t, api, 2)
				srv.Enqueue(llmtest.Call("read_file", `{"path": "notes`))
				req := userRequest("read it")
				req.Tools = []services.ToolSpec{readFileTool}
				resp, _, err := complete(t, p, req, stream)
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if len(resp.ToolCalls) != 1 {
					t.Fatalf("tool calls: %+v", resp.ToolCalls)
				}
				c := resp.ToolCalls[0]
				if c.Name != "read_file" || string(c.Arguments) != "{}" || !strings.Contains(c.Malformed, `"path`) || !strings.Contains(c.Malformed, "notes") {
					t.Errorf("call = %+v (arguments %s)", c, c.Arguments)
				}
				if n := srv.RequestCount(); n != 1 {
					t.Errorf("server got %d requests, want 1 (no retry)", n)
				}
			})
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, api, 0)
			var wg sync.WaitGroup
			errs := make(chan error, 20)
			for i := range 20 {
				wg.Go(func() {
					msg := fmt.Sprintf("message %d", i)
					resp, err := p.Complete(context.Background(), userRequest(msg), func(string) {})
					if err != nil {
						errs <- err
						return
					}
					if resp.Text != "echo: "+msg {
						errs <- fmt.Errorf("got %q for %q", resp.Text, msg)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n := srv.RequestCount(); n != 20 {
				t.Errorf("server got %d requests, want 20", n)
			}
		})
	}
}

func TestOpenAIWithoutAPIKey(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p, err := llm.New(llm.Config{Provider: "openai", BaseURL: srv.OpenAIBaseURL(), Model: "llama3.1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	resp, _, err := complete(t, p, userRequest("hi"), false)
	if err != nil || resp.Text != "echo: hi" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
}

func TestAnthropicBaseURLWithV1(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p := newProvider(t, llm.ProviderAnthropic, srv, llm.Config{BaseURL: srv.URL + "/v1/"})
	if resp, _, err := complete(t, p, userRequest("hi"), false); err != nil || resp.Text != "echo: hi" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
}

func BenchmarkStreamedCompletion(b *testing.B) {
	for _, api := range apis {
		b.Run(api, func(b *testing.B) {
			srv := llmtest.NewServer(b)
			cfg := llm.Config{Provider: api, Model: "bench", APIKey: "k", BaseURL: srv.OpenAIBaseURL()}
			if api == llm.ProviderAnthropic {
				cfg.BaseURL = srv.AnthropicBaseURL()
			}
			p, err := llm.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			req := userRequest("a short question for the benchmark")
			for b.Loop() {
				if _, err := p.Complete(context.Background(), req, func(string) {}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestUserImagesReachTheModel: a user message's images go to each API in
// its own form (image_url data URL parts, base64 image blocks) after the
// text, with their bytes intact.
func TestUserImagesReachTheModel(t *testing.T) {
	for _, api := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(api, func(t *testing.T) {
			p, srv := setup(t, api, 0)
			img := services.Image{MIMEType: "image/png", Data: []byte("\x89PNG fake bytes")}
			_, _, err := complete(t, p, llm.Request{Messages: []llm.Message{
				{Role: llm.RoleUser, Content: "what is in this photo?", Images: []services.Image{img}},
			}}, false)
			if err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 || len(reqs[0].Images) != 1 {
				t.Fatalf("requests: %+v", reqs)
			}
			got := reqs[0].Images[0]
			if got.Role != "user" || got.MIMEType != "image/png" || string(got.Data) != string(img.Data) || reqs[0].LastMessage != "what is in this photo?" {
				t.Fatalf("image as received: %+v, text %q", got, reqs[0].LastMessage)
			}
		})
	}
}

// TestRequestSettingsAndUserImages: stop sequences, a response format and
// a user message's images reach each API in its own form (OpenAI:
// stop, response_format, image_url parts; Anthropic: stop_sequences, an
// instruction closing the conversation, base64 image blocks), and the fake
// model answers the JSON the format asks for.
func TestRequestSettingsAndUserImages(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\nfake")
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, api, 0)
			req := userRequest("count")
			req.Messages[0].Images = []services.Image{{MIMEType: "image/png", Data: png}}
			req.Stop = []string{"END"}
			req.ResponseFormat = &services.ResponseFormat{Type: services.ResponseJSONSchema, Name: "count", Schema: schema, Strict: true}
			resp, _, err := complete(t, p, req, false)
			if err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0]
			body := got.JSON(t)
			if len(got.Stop) != 1 || got.Stop[0] != "END" {
				t.Errorf("stop: %v", got.Stop)
			}
			wantImage := "data:image/png;base64,iVBORw0KGgpmYWtl"
			if api == llm.ProviderOpenAI {
				if len(got.LastImages) != 1 || got.LastImages[0] != wantImage || got.LastMessage != "count" {
					t.Errorf("user message: %q images %v", got.LastMessage, got.LastImages)
				}
				rf, _ := body["response_format"].(map[string]any)
				js, _ := rf["json_schema"].(map[string]any)
				if rf["type"] != "json_schema" || js["name"] != "count" || js["strict"] != true {
					t.Errorf("response_format: %v", body["response_format"])
				}
				if resp.Text != `{"n":1}` {
					t.Errorf("answer %q", resp.Text)
				}
				return
			}
			// Anthropic: one user turn with the text, the image, then the
			// format's instruction.
			if len(got.LastImages) != 1 || got.LastImages[0] != wantImage {
				t.Errorf("images %v", got.LastImages)
			}
			if !strings.HasPrefix(got.LastMessage, "count\n") || !strings.Contains(got.LastMessage, `"required":["n"]`) {
				t.Errorf("last user turn: %q", got.LastMessage)
			}
			if _, ok := body["response_format"]; ok {
				t.Errorf("Anthropic got response_format")
			}
		})
	}
}

// TestSystemContextAfterTheCachedPrefix: system content that changes (the
// archived summary) follows the stable prefix: a second system block after
// the breakpoint for Anthropic, the same system message after the prefix
// for OpenAI-compatible servers; never a user message.
func TestSystemContextAfterTheCachedPrefix(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, api, 0)
			req := userRequest("hi")
			req.CacheSystem = true
			req.SystemContext = "Summary: the owner likes tea."
			if _, _, err := complete(t, p, req, false); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			body := srv.Requests()[0].JSON(t)
			if api == llm.ProviderAnthropic {
				system := body["system"].([]any)
				first, second := system[0].(map[string]any), system[1].(map[string]any)
				if first["text"] != "You are Switchboard." || first["cache_control"] == nil {
					t.Errorf("first system block = %v", first)
				}
				if second["text"] != req.SystemContext || second["cache_control"] != nil {
					t.Errorf("second system block = %v", second)
				}
			} else {
				msgs := body["messages"].([]any)
				sys := msgs[0].(map[string]any)
				if sys["role"] != "system" || sys["content"] != "You are Switchboard.\n\n"+req.SystemContext {
					t.Errorf("system message = %v", sys)
				}
				for _, m := range msgs[1:] {
					if m.(map[string]any)["role"] == "system" {
						t.Errorf("a second system message: %v", m)
					}
				}
			}
			if n := strings.Count(string(srv.Requests()[0].Body), "likes tea"); n != 1 {
				t.Errorf("summary sent %d times", n)
			}
		})
	}
}
