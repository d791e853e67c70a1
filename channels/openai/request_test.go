package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzChatRequest: any body is either refused with an *apiFail (a 400
// that names what is wrong) or accepted with a stored text that is valid,
// NUL-free UTF-8, and metadata that encodes to JSON (it is stored with the
// message).
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"switchboard","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"switchboard","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`,
		`{"model":"switchboard","messages":[{"role":"user","content":"x"}],"stop":["a"],"max_tokens":5,"temperature":1,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`,
		`{"model":"switchboard","messages":[{"role":"user","content":"x"}],"tools":null,"n":1,"logprobs":false}`,
		`{"model":"x","messages":[{"role":"assistant","content":"a","tool_calls":[]},{"role":"user","content":"b"}]}`,
		`[]`, `{"messages":"x"}`, `{"model":"switchboard","messages":[{"role":"user","content":"\u0000"}]}`,
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, images bool) {
		req, err := parseChatRequest(body, images, 32<<10)
		if err != nil {
			var fail *apiFail
			if !errors.As(err, &fail) || fail.status != 400 || fail.msg == "" || fail.code == "" {
				t.Fatalf("refusal %T %v", err, err)
			}
			return
		}
		if strings.TrimSpace(req.Text) == "" || !utf8.ValidString(req.Text) || strings.ContainsRune(req.Text, 0) {
			t.Fatalf("accepted text %q", req.Text)
		}
		if req.Turn != nil {
			if _, err := json.Marshal(req.Turn); err != nil {
				t.Fatalf("turn does not encode: %v", err)
			}
			if strings.ContainsRune(req.Turn.Instruction, 0) || len(req.Turn.Instruction) > 32<<10 {
				t.Fatalf("instruction %q", req.Turn.Instruction)
			}
			if len(req.Turn.Images) > 0 && !images {
				t.Fatal("images accepted for a model that does not read them")
			}
		}
	})
}
