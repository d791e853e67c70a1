package llmtest

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

func openAIFinishReason(reply Reply) string {
	switch {
	case reply.StopReason != "":
		return reply.StopReason
	case len(reply.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func openAIUsage(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":         u.PromptTokens,
		"completion_tokens":     u.CompletionTokens,
		"total_tokens":          u.PromptTokens + u.CompletionTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
	}
}

func openAIToolID(tc ToolCall, i int, id int64) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("call_%d_%d", id, i)
}

// openAICompletion is a non-streamed chat.completion object.
func openAICompletion(req Request, reply Reply, usage Usage, id int64) map[string]any {
	msg := map[string]any{"role": "assistant", "content": reply.Text}
	if reply.Text == "" && len(reply.ToolCalls) > 0 {
		msg["content"] = nil
	}
	if len(reply.ToolCalls) > 0 {
		var calls []map[string]any
		for i, tc := range reply.ToolCalls {
			calls = append(calls, map[string]any{
				"id": openAIToolID(tc, i, id), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	out := map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion",
		"created": time.Now().Unix(), "model": req.Model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": openAIFinishReason(reply), "logprobs": nil}},
		"usage":   openAIUsage(usage),
	}
	if reply.NoUsage {
		delete(out, "usage")
	}
	return out
}

// streamOpenAI writes chat.completion.chunk events ending in data: [DONE].
func streamOpenAI(w http.ResponseWriter, req Request, reply Reply, usage Usage, id int64) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	created := time.Now().Unix()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion.chunk",
			"created": created, "model": req.Model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, frag := range fragments(reply.Text) {
		if reply.CutAfter > 0 && i == reply.CutAfter {
			panic(http.ErrAbortHandler)
		}
		if reply.FragmentDelay > 0 {
			time.Sleep(reply.FragmentDelay)
		}
		sse(w, "", chunk(map[string]any{"content": frag}, nil))
	}
	for i, tc := range reply.ToolCalls {
		sse(w, "", chunk(map[string]any{"tool_calls": []map[string]any{{
			"index": i, "id": openAIToolID(tc, i, id), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil))
		for _, part := range halves(tc.Arguments) {
			sse(w, "", chunk(map[string]any{"tool_calls": []map[string]any{{
				"index": i, "function": map[string]any{"arguments": part},
			}}}, nil))
		}
	}
	if reply.CutAfter > 0 {
		panic(http.ErrAbortHandler) // cut before the end even if the text was short
	}
	sse(w, "", chunk(map[string]any{}, openAIFinishReason(reply)))
	if includeUsage(req) && !reply.NoUsage {
		sse(w, "", map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion.chunk",
			"created": created, "model": req.Model, "choices": []any{}, "usage": openAIUsage(usage),
		})
	}
	sse(w, "", "[DONE]")
}

// includeUsage reports whether stream_options.include_usage was requested.
func includeUsage(req Request) bool { return req.includeUsage }

// openAIToolMessage is what the tool rule reads of a message.
type openAIToolMessage struct {
	Role      string `json:"-"`
	ToolCalls []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// openAIToolRule enforces what OpenAI enforces: an assistant message with
// tool_calls must be followed by tool messages responding to each
// tool_call_id, and a tool message must answer such a call. It returns
// OpenAI's complaint, or "" for a valid request. A refused request is
// recorded but uses no scripted reply.
func openAIToolRule(msgs []openAIToolMessage) string {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == "tool" {
			return fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[%d])", i)
		}
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		answered := map[string]bool{}
		for i+1 < len(msgs) && msgs[i+1].Role == "tool" {
			i++
			answered[msgs[i].ToolCallID] = true
		}
		var missing []string
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				missing = append(missing, c.ID)
			}
		}
		if len(missing) > 0 {
			return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(missing, ", ")
		}
	}
	return ""
}
