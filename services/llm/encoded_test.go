package llm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// splicedIsSDKs sends req to api's fake server three times, each by a new
// provider: with the cache of encoded parts off (the SDK's own body),
// then on from empty (parts encoded and kept), then on with the parts
// kept; it fails unless the three bodies are byte for byte the same. The
// cache stays on with the parts of req kept.
func splicedIsSDKs(t *testing.T, api string, req llm.Request, stream bool) {
	t.Helper()
	var bodies [][]byte
	for i, on := range []bool{false, true, true} {
		if i < 2 {
			llm.SetEncodedCache(on)
		}
		p, srv := setup(t, api, 0)
		srv.Enqueue(llmtest.Reply{Text: "ok"})
		if _, _, err := complete(t, p, req, stream); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, srv.Requests()[0].Body)
	}
	for i, b := range bodies[1:] {
		if !bytes.Equal(b, bodies[0]) {
			t.Fatalf("body %d with kept parts differs from the one made from scratch:\n%s\n%s", i+1, b, bodies[0])
		}
	}
	sameAsSDK(t, bodies[0])
}

// sameAsSDK fails unless body is byte for byte the body the provider SDKs
// sent for this test when the package still used them
// (testdata/sdkbodies, recorded from the SDK-based code before our own
// clients replaced it; not to be rewritten from this code).
func sameAsSDK(t *testing.T, body []byte) {
	t.Helper()
	path := filepath.Join("testdata", "sdkbodies", strings.ReplaceAll(t.Name(), "/", "_")+".json")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("body differs from the SDK's (%s):\n%s\n%s", path, body, want)
	}
}

// The OpenAI body made from kept parts is byte for byte the one the SDK
// makes from scratch, for every kind of part, and the parts are reused.
func TestEncodedPartsAreTheSDKsBytes(t *testing.T) {
	defer llm.SetEncodedCache(true)
	req := llm.Request{
		System:        "You are Switchboard. <b>Quotes</b> \"and\" & ampersands, ünïcode, 漢字.",
		SystemContext: "Summary of the earlier conversation.",
		Tools: []services.ToolSpec{
			readFileTool,
			{Name: "now", Description: "The time."},
			{Name: "search", Description: "Search <things>.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"a & b"}},"required":["q"]}`)},
		},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "read <notes.md> & tell me"},
			{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: []services.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path": "notes.md"}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Content: "line 1\nline \"2\""},
			{Role: llm.RoleAssistant, ToolCalls: []services.ToolCall{{ID: "c2", Name: "now", Arguments: json.RawMessage(`{}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c2", Content: "no clock", IsError: true},
			{Role: llm.RoleAssistant, Content: "It says line 1."},
			{Role: llm.RoleUser, Content: "thanks"},
		},
	}
	temp := 0.2
	withSettings := req
	withSettings.Messages = append(append([]llm.Message(nil), req.Messages...),
		llm.Message{Role: llm.RoleUser, Content: "and this picture?", Images: []services.Image{{MIMEType: "image/png", Data: []byte("\x89PNG fake")}}})
	withSettings.MaxTokens, withSettings.Temperature, withSettings.Stop = 300, &temp, []string{"END"}
	withSettings.ResponseFormat = &services.ResponseFormat{Type: services.ResponseJSONSchema, Name: "answer",
		Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`), Strict: true}
	for _, c := range []struct {
		name   string
		req    llm.Request
		stream bool
	}{{"plain", req, false}, {"stream", req, true}, {"settings-and-image", withSettings, true}} {
		req, stream := c.req, c.stream
		t.Run(c.name, func(t *testing.T) {
			splicedIsSDKs(t, llm.ProviderOpenAI, req, stream)
			kept := 1 + len(req.Tools) // system and tools
			for _, m := range req.Messages {
				if len(m.Images) == 0 { // messages with images are not kept
					kept++
				}
			}
			if n := llm.EncodedCacheLen(); n != kept {
				t.Errorf("%d parts kept, want %d (system, tools, messages without images)", n, kept)
			}
		})
	}
	// A part that cannot be encoded is still refused, kept or not.
	bad := llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []services.ToolCall{{ID: "x", Name: "f", Arguments: json.RawMessage(`[1]`)}}}}}
	p, _ := setup(t, llm.ProviderOpenAI, 0)
	for range 2 {
		if _, _, err := complete(t, p, bad, false); !services.IsKind(err, services.EINVALID) {
			t.Fatalf("tool call with array arguments: err = %v, want EINVALID", err)
		}
	}
}

// The Anthropic body made from kept parts is byte for byte the one the SDK
// makes from scratch: system blocks, tools (the last one the breakpoint
// when there is no system prompt), messages of one role merged, cache
// points on the messages CacheAt names (a message without blocks marks
// the one before it), images, the response format's instruction, and the
// other settings.
func TestAnthropicEncodedPartsAreTheSDKsBytes(t *testing.T) {
	defer llm.SetEncodedCache(true)
	temp := 0.2
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "read <notes.md> & tell me, ünïcode 漢字"},
		{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: []services.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path": "notes.md"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: "line 1\nline \"2\""},
		{Role: llm.RoleAssistant, ToolCalls: []services.ToolCall{{ID: "c2", Name: "now", Arguments: json.RawMessage(`{}`)}, {ID: "c3", Name: "now", Arguments: json.RawMessage(`{"tz":"UTC"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "c2", Content: "no clock", IsError: true},
		{Role: llm.RoleTool, ToolCallID: "c3", Content: ""},
		{Role: llm.RoleUser, Content: "and then"},
		{Role: llm.RoleAssistant, Content: "It says line 1."},
		{Role: llm.RoleUser, Content: ""},
		{Role: llm.RoleUser, Content: "thanks"},
	}
	tools := []services.ToolSpec{
		readFileTool,
		{Name: "now", Description: "The time."},
		{Name: "search", Description: "Search <things>.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"a & b"}},"required":["q"],"additionalProperties":false}`)},
	}
	full := llm.Request{
		System: "You are Switchboard. <b>Quotes</b> \"and\" & ampersands.", SystemContext: "Summary of the earlier conversation.",
		CacheSystem: true, CacheAt: []int{2, 5, 8}, Tools: tools, Messages: history,
	}
	noSystem := llm.Request{CacheSystem: true, CacheAt: []int{7}, Tools: tools, Messages: history}
	contextOnly := llm.Request{SystemContext: "Only a summary.", CacheSystem: true, Messages: history[:3]}
	settings := full
	settings.CacheSystem, settings.CacheAt = false, nil
	settings.Messages = append(append([]llm.Message(nil), history...),
		llm.Message{Role: llm.RoleUser, Content: "and this picture?", Images: []services.Image{{MIMEType: "image/png", Data: []byte("\x89PNG fake")}}})
	settings.MaxTokens, settings.Temperature, settings.Stop = 300, &temp, []string{"END", "</x>"}
	settings.ResponseFormat = &services.ResponseFormat{Type: services.ResponseJSONSchema, Name: "answer",
		Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`), Strict: true}
	afterAssistant := llm.Request{Messages: history[:8], ResponseFormat: &services.ResponseFormat{Type: services.ResponseJSONObject}}
	for _, c := range []struct {
		name   string
		req    llm.Request
		stream bool
	}{{"cached", full, false}, {"cached-stream", full, true}, {"no-system", noSystem, true}, {"context-only", contextOnly, false},
		{"settings-and-image", settings, true}, {"format-after-assistant", afterAssistant, false}, {"empty", llm.Request{}, false}} {
		req, stream := c.req, c.stream
		t.Run(c.name, func(t *testing.T) {
			splicedIsSDKs(t, llm.ProviderAnthropic, req, stream)
			if len(req.Messages) > 0 && llm.EncodedCacheLen() == 0 {
				t.Error("no parts kept")
			}
		})
	}
	// A part that cannot be encoded is still refused, kept or not.
	for _, bad := range []llm.Request{
		{Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []services.ToolCall{{ID: "x", Name: "f", Arguments: json.RawMessage(`[1]`)}}}}},
		{Messages: []llm.Message{{Role: llm.RoleTool, Content: "no call id"}}},
		{Messages: []llm.Message{{Role: "narrator", Content: "who?"}}},
	} {
		p, _ := setup(t, llm.ProviderAnthropic, 0)
		for range 2 {
			if _, _, err := complete(t, p, bad, false); !services.IsKind(err, services.EINVALID) {
				t.Fatalf("%+v: err = %v, want EINVALID", bad.Messages[0], err)
			}
		}
	}
}

// BenchmarkRequestBody measures encoding one turn's request body (a 4 KB
// system prompt, 20 tools, 60 history messages with tool calls, a new
// input each time), spliced from kept parts and (sdk) by the SDK alone.
// Run on purpose:
//
//	go test -run '^$' -bench RequestBody -benchmem ./services/llm/
func BenchmarkRequestBody(b *testing.B) {
	req := llm.Request{System: strings.Repeat("You are Switchboard, a helpful agent. ", 110), SystemContext: "Summary of the earlier conversation.", CacheSystem: true}
	for i := range 20 {
		req.Tools = append(req.Tools, services.ToolSpec{Name: fmt.Sprintf("tool_%d", i), Description: "Does a thing with a path.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"the path"},"limit":{"type":"integer"}},"required":["path"]}`)})
	}
	for i := range 15 {
		id := fmt.Sprintf("call_%d", i)
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("question %d: please read the notes and tell me what they say about the plan", i)},
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []services.ToolCall{{ID: id, Name: "tool_1", Arguments: json.RawMessage(`{"path":"notes.md"}`)}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: strings.Repeat("a line of the notes file, ", 20)},
			llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprintf("answer %d: the notes say the plan is on track, with two open items.", i)})
	}
	req.CacheAt = []int{len(req.Messages) - 5, len(req.Messages) - 1}
	for _, api := range apis {
		for _, splice := range []bool{true, false} {
			name := api
			if !splice {
				name += "-sdk"
			}
			b.Run(name, func(b *testing.B) {
				defer llm.SetEncodedCache(true)
				llm.SetEncodedCache(splice)
				p := newProvider(b, api, nil, llm.Config{BaseURL: "http://127.0.0.1:1"})
				n := 0
				for b.Loop() {
					n++
					r := req
					r.Messages = append(req.Messages[:len(req.Messages):len(req.Messages)], llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("new input %d", n)})
					if _, err := llm.RequestBody(p, r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The kept parts are those requests still use: a conversation's parts go
// once other requests have made two generations of lookups without them,
// well before the byte bound, and the conversation's next request is
// made again from scratch, byte for byte the SDK's.
func TestEncodedPartsOfQuietConversationsGo(t *testing.T) {
	defer llm.SetEncodedCache(true)
	llm.SetEncodedCache(true)
	p, err := llm.NewOpenAI(llm.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	conversation := func(name string, turns int) llm.Request {
		req := llm.Request{System: "You are Switchboard.", Tools: []services.ToolSpec{readFileTool}}
		for i := range turns {
			req.Messages = append(req.Messages,
				llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("%s question %d", name, i)},
				llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprintf("%s answer %d", name, i)})
		}
		return req
	}
	quiet, busy := conversation("quiet", 20), conversation("busy", 20)
	first, err := llm.RequestBody(p, quiet)
	if err != nil {
		t.Fatal(err)
	}
	// The busy conversation: its parts, the shared system prompt and tool,
	// over two generations of lookups.
	perRequest := 2 + len(busy.Messages)
	for range 2*llm.EncodedRotate/perRequest + 2 {
		if _, err := llm.RequestBody(p, busy); err != nil {
			t.Fatal(err)
		}
	}
	if n, want := llm.EncodedCacheLen(), 2+len(busy.Messages); n != want {
		t.Fatalf("%d parts kept (%d bytes), want %d: the busy conversation's, the system prompt and the tool", n, llm.EncodedCacheBytes(), want)
	}
	again, err := llm.RequestBody(p, quiet)
	if err != nil {
		t.Fatal(err)
	}
	llm.SetEncodedCache(false)
	sdk, err := llm.RequestBody(p, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, sdk) || !bytes.Equal(first, sdk) {
		t.Fatalf("the quiet conversation's body differs from the SDK's:\n%s\n%s\n%s", first, again, sdk)
	}
}
