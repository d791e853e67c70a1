package llm_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

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
			var bodies [][]byte
			for i, on := range []bool{false, true, true} {
				if i < 2 {
					llm.SetEncodedCache(on)
				}
				p, srv := setup(t, llm.ProviderOpenAI, 0)
				srv.Enqueue(llmtest.Reply{Text: "ok"})
				if _, _, err := complete(t, p, req, stream); err != nil {
					t.Fatal(err)
				}
				bodies = append(bodies, srv.Requests()[0].Body)
			}
			kept := 1 + len(req.Tools) // system and tools
			for _, m := range req.Messages {
				if len(m.Images) == 0 { // messages with images are not kept
					kept++
				}
			}
			if n := llm.EncodedCacheLen(); n != kept {
				t.Errorf("%d parts kept, want %d (system, tools, messages without images)", n, kept)
			}
			for i, b := range bodies[1:] {
				if !bytes.Equal(b, bodies[0]) {
					t.Fatalf("body %d with kept parts differs from the SDK's:\n%s\n%s", i+1, b, bodies[0])
				}
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
