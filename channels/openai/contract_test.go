package openai_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	v1 "github.com/switchboard/switchboard/channels/openai"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// pngDataURL is a small real PNG as a data URL.
func pngDataURL(t *testing.T) (string, []byte) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes()), b.Bytes()
}

// The request's settings reach the model for that turn only: the system
// message as an instruction closing the system prompt, max_tokens,
// temperature, stop and response_format; the next request has none.
func TestAPIRequestSettingsReachTheModel(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	schema := `{"type":"object","properties":{"city":{"type":"string"},"temp":{"type":"integer"}},"required":["city","temp"],"additionalProperties":false}`
	resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken, `{"model":"switchboard",
		"messages":[{"role":"system","content":"Answer in French."},{"role":"user","content":"earlier"},
			{"role":"assistant","content":"earlier answer"},{"role":"user","content":"weather in Paris"}],
		"max_tokens":50,"max_completion_tokens":40,"temperature":0.3,"stop":["END"],"n":1,"logprobs":false,"top_p":1,
		"response_format":{"type":"json_schema","json_schema":{"name":"weather","strict":true,"schema":`+schema+`}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Switchboard-Ignored-Messages"); got != "2" {
		t.Errorf("ignored messages header %q, want 2", got)
	}
	var out struct {
		Choices []struct{ Message struct{ Content string } }
	}
	_ = json.Unmarshal([]byte(body), &out)
	if len(out.Choices) != 1 || out.Choices[0].Message.Content != `{"city":"weather in Paris","temp":1}` {
		t.Fatalf("answer: %s", body)
	}
	reqs := in.Model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	m := reqs[0].JSON(t)
	if m["max_tokens"] != float64(40) || m["temperature"] != 0.3 || reqs[0].Stop[0] != "END" {
		t.Errorf("settings: max_tokens %v temperature %v stop %v", m["max_tokens"], m["temperature"], reqs[0].Stop)
	}
	rf, _ := m["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != "weather" || js["strict"] != true || js["schema"] == nil {
		t.Errorf("response_format: %v", m["response_format"])
	}
	system := systemText(t, m)
	if !strings.Contains(system, "Answer in French.") {
		t.Errorf("instruction missing from the system prompt: %.300s", system)
	}
	if reqs[0].LastMessage != "weather in Paris" || strings.Contains(string(reqs[0].Body), "earlier answer") {
		t.Errorf("model input: last %q", reqs[0].LastMessage)
	}

	// The next request asks nothing: none of it is applied.
	resp, body = do(t, "POST", in.URL+"/v1/chat/completions", testToken,
		`{"model":"switchboard","messages":[{"role":"user","content":"plain again"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "echo: plain again") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	m = in.Model.Requests()[1].JSON(t)
	if _, ok := m["response_format"]; ok || m["temperature"] != nil || strings.Contains(systemText(t, m), "Answer in French.") {
		t.Errorf("second request kept the first one's settings: %v", m)
	}
	// Clients see the stored message without what it asked of its turn.
	resp, body = do(t, "GET", in.URL+"/api/timeline", testToken, "")
	if resp.StatusCode != 200 || strings.Contains(body, "Answer in French") || strings.Contains(body, `"request"`) {
		t.Errorf("timeline shows the request's settings: %s", body)
	}
}

func systemText(t *testing.T, m map[string]any) string {
	t.Helper()
	msgs, _ := m["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatal("no messages")
	}
	first, _ := msgs[0].(map[string]any)
	if first["role"] != "system" {
		t.Fatalf("first message %v", first)
	}
	s, _ := first["content"].(string)
	return s
}

// response_format json_schema through the official client: the answer
// parses into the schema's type; an answer that does not validate is a
// 502 naming the problem, and is still stored.
func TestAPIResponseFormatSchema(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	cl := in.client(testToken)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 2},
	}, "required": []string{"name", "tags"}}
	params := openai.ChatCompletionNewParams{
		Model:    v1.ModelID,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("describe")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "card", Schema: schema}}},
	}
	resp, err := cl.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	var card struct {
		Name string
		Tags []string
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &card); err != nil || card.Name != "describe" || len(card.Tags) != 2 {
		t.Fatalf("answer %q: %v", resp.Choices[0].Message.Content, err)
	}
	// A fenced answer is unwrapped; a wrong one refused.
	in.Model.Enqueue(llmtest.Text("```json\n{\"name\":\"x\",\"tags\":[\"a\",\"b\"]}\n```"))
	resp, err = cl.Chat.Completions.New(context.Background(), params)
	if err != nil || resp.Choices[0].Message.Content != `{"name":"x","tags":["a","b"]}` {
		t.Fatalf("fenced: %v %+v", err, resp)
	}
	for _, bad := range []struct{ answer, want string }{
		{`{"name":"x","tags":["only one"]}`, "tags"},
		{`Sure! Here it is.`, "not JSON"},
	} {
		in.Model.Enqueue(llmtest.Text(bad.answer))
		_, err = cl.Chat.Completions.New(context.Background(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Code != "response_format_mismatch" ||
			apiErr.Param != "response_format" || !strings.Contains(apiErr.Message, bad.want) || !strings.Contains(apiErr.Message, `"card"`) && bad.want == "tags" {
			t.Fatalf("%q: %v", bad.answer, err)
		}
	}
	msgs := in.timeline(t, services.DefaultTimeline)
	if len(msgs) != 8 || msgs[7].Content != "Sure! Here it is." {
		t.Fatalf("timeline: %d rows", len(msgs))
	}
	// Streamed, the mismatch found at the end is the stream's error event.
	in.Model.Enqueue(llmtest.Reply{Text: "Well, let me think about it.", FragmentDelay: 80 * time.Millisecond})
	stream := cl.Chat.Completions.NewStreaming(context.Background(), params)
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "response_format_mismatch") || text.Len() == 0 {
		t.Fatalf("stream: %v after %q", err, text.String())
	}
}

// Unsupported fields are refused by name before anything is stored, and
// unknown models are 404 model_not_found.
func TestAPIUnsupportedFields(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ body, param, code string }{
		{`{"model":"switchboard",` + user + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, "tools", "unsupported_parameter"},
		{`{"model":"switchboard",` + user + `,"tool_choice":"auto"}`, "tool_choice", "unsupported_parameter"},
		{`{"model":"switchboard",` + user + `,"functions":[{"name":"f"}]}`, "functions", "unsupported_parameter"},
		{`{"model":"switchboard",` + user + `,"n":2}`, "n", "unsupported_parameter"},
		{`{"model":"switchboard",` + user + `,"logprobs":true}`, "logprobs", "unsupported_parameter"},
		{`{"model":"switchboard",` + user + `,"top_logprobs":3}`, "top_logprobs", "unsupported_parameter"},
		{`{"model":"switchboard",` + user + `,"top_p":0.5}`, "top_p", "unsupported_parameter"},
		{`{"model":"switchboard",` + user + `,"frobnicate":1}`, "frobnicate", "unknown_parameter"},
		{`{"model":"switchboard",` + user + `,"temperature":3}`, "temperature", "invalid_value"},
		{`{"model":"switchboard",` + user + `,"max_tokens":0}`, "max_tokens", "invalid_value"},
		{`{"model":"switchboard",` + user + `,"stop":["a","b","c","d","e"]}`, "stop", "invalid_value"},
		{`{"model":"switchboard",` + user + `,"response_format":{"type":"yaml"}}`, "response_format.type", "invalid_value"},
		{`{"model":"switchboard",` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"$ref":"#/nope"}}}}}}`, "response_format.json_schema.schema", "invalid_schema"},
		{`{"model":"switchboard",` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","description":"a\u0000b"}}}}`, "response_format.json_schema.schema", "invalid_text"},
		{`{"model":"switchboard","messages":[{"role":"user","content":"hi"},{"role":"tool","content":"r","tool_call_id":"c1"}]}`, "messages[1].role", "unsupported_parameter"},
		{`{"model":"switchboard","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"hi"}]}`, "messages[0].tool_calls", "unsupported_parameter"},
		{`{"model":"switchboard","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}]}`, "messages[1]", "invalid_value"},
		{`{"model":"switchboard","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0].type", "unsupported_content_type"},
		{`{"model":"switchboard","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, "stream_options", "invalid_value"},
	} {
		resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken, c.body)
		var e struct {
			Error struct {
				Message, Type string
				Param, Code   *string
			}
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" ||
			e.Error.Param == nil || *e.Error.Param != c.param || e.Error.Code == nil || *e.Error.Code != c.code ||
			!strings.Contains(e.Error.Message, strings.SplitN(c.param, ".", 2)[0]) {
			t.Errorf("%s: %d %s; want 400 param %q code %q", c.body, resp.StatusCode, body, c.param, c.code)
		}
	}
	// Neutral values and nulls are accepted.
	resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken, `{"model":"switchboard",`+user+
		`,"tools":null,"top_p":1,"frequency_penalty":0,"presence_penalty":0,"logprobs":false,"n":1,"seed":42,"parallel_tool_calls":true,"store":false,"response_format":{"type":"text"}}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "echo: hi") {
		t.Fatalf("neutral values: %d %s", resp.StatusCode, body)
	}
	cl := in.client(testToken)
	_, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
		t.Fatalf("unknown model: %v", err)
	}
	if msgs := in.timeline(t, services.DefaultTimeline); len(msgs) != 2 {
		t.Fatalf("refusals stored rows: %d", len(msgs))
	}
}

// Errors the router and middleware raise on /v1 are in OpenAI's shape too:
// an oversize body (naming the limit), an unknown route, a wrong method.
func TestAPIRouteErrorsShape(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	big := `{"model":"switchboard","messages":[{"role":"user","content":"` + strings.Repeat("x", v1.BodyLimit) + `"}]}`
	for _, c := range []struct {
		method, path, token, body string
		status                    int
		code, want                string
	}{
		{"POST", "/v1/chat/completions", testToken, big, 413, "request_too_large", "4 MiB"},
		{"POST", "/v1/chat/completions", testToken, `{"model":"switchboard","messages":[{"role":"user","content":"` + strings.Repeat("x", 40000) + `"}]}`,
			413, "message_too_long", "the limit is 32768"},
		{"GET", "/v1/nope", testToken, "", 404, "unknown_url", "GET /v1/nope"},
		{"GET", "/v1/nope", "", "", 401, "invalid_api_key", "API key"},
		{"GET", "/v1", "", "", 401, "invalid_api_key", "API key"},
		{"GET", "/v1", testToken, "", 404, "unknown_url", "GET /v1;"},
		{"GET", "/v1/chat/completions", testToken, "", 405, "method_not_allowed", "use POST"},
		{"DELETE", "/v1/models", testToken, "", 405, "method_not_allowed", "use GET"},
		{"GET", "/v1/models/gpt-4o", testToken, "", 404, "model_not_found", "gpt-4o"},
	} {
		resp, body := do(t, c.method, in.URL+c.path, c.token, c.body)
		var e struct {
			Error struct {
				Message, Type string
				Code          *string
			}
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != c.status || e.Error.Code == nil ||
			*e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.want) || e.Error.Type == "" {
			t.Errorf("%s %s: %d %.300s; want %d %s naming %q", c.method, c.path, resp.StatusCode, body, c.status, c.code, c.want)
		}
	}
	// A body between the rest of the API's limit and /v1's is fine here
	// (a long history the server ignores).
	earlier := strings.Repeat(`{"role":"assistant","content":"`+strings.Repeat("y", 30<<10)+`"},`, 10)
	resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken,
		`{"model":"switchboard","messages":[`+earlier+`{"role":"user","content":"long history"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchboard-Ignored-Messages") != "10" {
		t.Fatalf("300 KiB body: %d %.300s", resp.StatusCode, body)
	}
	// The system messages are one instruction, bounded like a message.
	resp, body = do(t, "POST", in.URL+"/v1/chat/completions", testToken,
		`{"model":"switchboard","messages":[{"role":"system","content":"`+strings.Repeat("z", 40<<10)+`"},{"role":"user","content":"big system"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "at most 32768 are accepted") {
		t.Fatalf("40 KiB instruction: %d %.300s", resp.StatusCode, body)
	}
}

// An image part reaches a model that reads images as an image part of the
// user message; the stored message keeps the text.
func TestAPIImageInput(t *testing.T) {
	t.Parallel()
	pool := dbtest.PoolFor(t, newSchemaURL(t))
	model := llmtest.NewServer(t)
	st := newStack(t, pool, stackOpts{model: model, images: true})
	in := &apiInstance{URL: st.URL, Store: st.Store, Model: model}
	url, raw := pngDataURL(t)
	cl := in.client(testToken)
	resp, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("what is in this picture?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}),
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Stored as an attachment, the image is named in the input too.
	if !strings.HasPrefix(resp.Choices[0].Message.Content, "echo: what is in this picture?\n[image image-1.png, image/png, 4×3,") {
		t.Fatalf("answer %q", resp.Choices[0].Message.Content)
	}
	reqs := in.Model.Requests()
	if len(reqs) != 1 || len(reqs[0].LastImages) != 1 || reqs[0].LastImages[0] != url {
		t.Fatalf("model got images %v", reqs[len(reqs)-1].LastImages)
	}
	_ = raw
	msgs := in.timeline(t, services.DefaultTimeline)
	if len(msgs) != 2 || msgs[0].Content != "what is in this picture?" {
		t.Fatalf("timeline: %+v", msgs)
	}
	// The next turn's prompt carries the text, not the image again.
	if _, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("and now?")},
	}); err != nil {
		t.Fatal(err)
	}
	if next := in.Model.Requests()[1]; strings.Contains(string(next.Body), "image_url") {
		t.Fatalf("the image went to the model again")
	}
	// Bad images are refused naming the part.
	for _, c := range []struct{ url, code string }{
		{"https://example.org/cat.png", "invalid_image_url"},
		{"data:image/png;base64,bm90IGEgcG5n", "invalid_image_format"},
		{"data:image/bmp;base64,Qk0=", "invalid_image_format"},
	} {
		body := `{"model":"switchboard","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"` + c.url + `"}}]}]}`
		r, b := do(t, "POST", in.URL+"/v1/chat/completions", testToken, body)
		if r.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"param":"messages[0].content[1].image_url.url"`) || !strings.Contains(b, c.code) {
			t.Errorf("%s: %d %s", c.url, r.StatusCode, b)
		}
	}
}

// The owner's /stop (from any channel) ends a waiting API request with 409
// run_cancelled; the stop notice is in the timeline.
func TestAPIStoppedAnswer(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	in.Model.Enqueue(llmtest.Reply{Text: "too late", Delay: 30 * time.Second})
	type result struct {
		status int
		body   string
	}
	done := make(chan result, 1)
	go func() {
		resp, body := do(t, "POST", in.URL+"/v1/chat/completions", testToken,
			`{"model":"switchboard","messages":[{"role":"user","content":"take your time"}]}`)
		done <- result{resp.StatusCode, body}
	}()
	// Stop once the model has the question.
	if !poll(30*time.Second, func() bool { return in.Model.RequestCount() > 0 }) {
		t.Fatal("the question never reached the model")
	}
	if resp, body := do(t, "POST", in.URL+"/api/messages", testToken, `{"content":"/stop"}`); resp.StatusCode != 201 {
		t.Fatalf("/stop: %d %s", resp.StatusCode, body)
	}
	select {
	case r := <-done:
		if r.status != 409 || !strings.Contains(r.body, `"code":"run_cancelled"`) || !strings.Contains(r.body, "/stop") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the API request did not end after /stop")
	}
}

// Without a configured model the endpoint says so and stores nothing.
func TestAPIWithoutModel(t *testing.T) {
	t.Parallel()
	pool := dbtest.PoolFor(t, newSchemaURL(t))
	st := newStack(t, pool, stackOpts{})
	resp, body := do(t, "POST", st.URL+"/v1/chat/completions", testToken,
		`{"model":"switchboard","messages":[{"role":"user","content":"anyone there?"}]}`)
	if resp.StatusCode != 503 || !strings.Contains(body, `"code":"model_not_configured"`) || !strings.Contains(body, "LLM_PROVIDER") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	msgs, err := st.Store.ListTimeline(context.Background(), services.TimelineQuery{TimelineScope: services.DefaultTimeline, BeforeID: 1<<63 - 1, Limit: 10})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("stored %d rows (%v)", len(msgs), err)
	}
}

// A model call that times out is 504 model_timeout.
func TestAPIModelTimeout(t *testing.T) {
	t.Parallel()
	pool := dbtest.PoolFor(t, newSchemaURL(t))
	model := llmtest.NewServer(t)
	st := newStack(t, pool, stackOpts{model: model, modelTimeout: 300 * time.Millisecond})
	model.Enqueue(llmtest.Reply{Text: "late", Delay: 5 * time.Second})
	resp, body := do(t, "POST", st.URL+"/v1/chat/completions", testToken,
		`{"model":"switchboard","messages":[{"role":"user","content":"slow model"}]}`)
	if resp.StatusCode != 504 || !strings.Contains(body, `"code":"model_timeout"`) || !strings.Contains(body, "timed out") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// An answer cut at max_tokens has finish_reason "length" (streamed too),
// even with a response_format its cut JSON no longer meets.
func TestAPIFinishReasonLength(t *testing.T) {
	t.Parallel()
	in := newAPIInstance(t, 0)
	cl := in.client(testToken)
	in.Model.Enqueue(llmtest.Reply{Text: `{"name":"a long na`, StopReason: "length"}, llmtest.Reply{Text: "cut short", StopReason: "length", FragmentDelay: 60 * time.Millisecond})
	resp, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("long")},
		MaxTokens:      openai.Int(5),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	})
	if err != nil || resp.Choices[0].FinishReason != "length" || resp.Choices[0].Message.Content != `{"name":"a long na` {
		t.Fatalf("%v %+v", err, resp)
	}
	stream := cl.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("long again")}, MaxTokens: openai.Int(2),
	})
	finish := ""
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if stream.Err() != nil || finish != "length" {
		t.Fatalf("stream: %v finish %q", stream.Err(), finish)
	}
	// Without a bound hit, "stop".
	resp, err = cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: v1.ModelID, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("short")},
	})
	if err != nil || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("%v %+v", err, resp)
	}
}
