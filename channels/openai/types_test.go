package openai

import (
	"encoding/json"
	"testing"
)

// TestAnswersKeepTheirBytes: the typed answers marshal to the bytes the
// answers have always had (they were maps, so their keys are sorted).
func TestAnswersKeepTheirBytes(t *testing.T) {
	comp := &completion{id: "chatcmpl-7", created: 1700000000}
	s := &sse{comp: comp}
	empty, stop := "", "stop"
	u := Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}
	const head = `"created":1700000000,"id":"chatcmpl-7","model":"switchboard","object":"chat.completion.chunk"`
	for _, c := range []struct {
		v    any
		want string
	}{
		{s.chunk(Delta{Role: "assistant", Content: &empty}, nil),
			`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],` + head + `}`},
		{s.text("hi"), `{"choices":[{"delta":{"content":"hi"},"finish_reason":null,"index":0,"logprobs":null}],` + head + `}`},
		{s.chunk(Delta{}, &stop), `{"choices":[{"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],` + head + `}`},
		{Chunk{ID: comp.id, Object: "chat.completion.chunk", Created: comp.created, Model: ModelID, Choices: []ChunkChoice{}, Usage: &u},
			`{"choices":[],` + head + `,"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`},
		{Completion{ID: comp.id, Object: "chat.completion", Created: comp.created, Model: ModelID, Usage: u,
			Choices: []Choice{{FinishReason: "length", Message: Message{Role: "assistant", Content: "x"}}}},
			`{"choices":[{"finish_reason":"length","index":0,"logprobs":null,"message":{"content":"x","refusal":null,"role":"assistant"}}],` +
				`"created":1700000000,"id":"chatcmpl-7","model":"switchboard","object":"chat.completion","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`},
		{ModelList{Data: []Model{theModel}, Object: "list"},
			`{"data":[{"id":"switchboard","object":"model","created":1767225600,"owned_by":"switchboard"}],"object":"list"}`},
		{errorBody(429, "", "", "slow down"),
			`{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{(&apiFail{status: 400, code: "invalid_value", param: "stop", msg: "m"}).body(),
			`{"error":{"message":"m","type":"invalid_request_error","param":"stop","code":"invalid_value"}}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%T:\n got %s\nwant %s", c.v, b, c.want)
		}
	}
}
