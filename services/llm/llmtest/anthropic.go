package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

func anthropicStopReason(reply Reply) string {
	switch {
	case reply.StopReason != "":
		return reply.StopReason
	case len(reply.ToolCalls) > 0:
		return "tool_use"
	default:
		return "end_turn"
	}
}

func anthropicUsage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":                max(0, u.PromptTokens-u.CachedTokens-u.CacheWriteTokens),
		"output_tokens":               u.CompletionTokens,
		"cache_read_input_tokens":     u.CachedTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens,
	}
}

func anthropicToolID(tc ToolCall, i int, id int64) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("toolu_%d_%d", id, i)
}

// anthropicInput is a tool's input as JSON; malformed arguments are sent as a
// JSON string so that the body stays parseable but the input is no object.
func anthropicInput(args string) json.RawMessage {
	if args == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

// anthropicMessage is a non-streamed message object.
func anthropicMessage(req Request, reply Reply, usage Usage, id int64) map[string]any {
	content := []map[string]any{}
	if reply.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	for i, tc := range reply.ToolCalls {
		content = append(content, map[string]any{
			"type": "tool_use", "id": anthropicToolID(tc, i, id), "name": tc.Name, "input": anthropicInput(tc.Arguments),
		})
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_%d", id), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": anthropicStopReason(reply), "stop_sequence": nil,
		"usage": anthropicUsage(usage),
	}
}

// streamAnthropic writes the Messages streaming events: message_start, per
// block content_block_start/delta/stop, message_delta and message_stop.
func streamAnthropic(w http.ResponseWriter, req Request, reply Reply, usage Usage, id int64) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	startUsage := anthropicUsage(usage)
	startUsage["output_tokens"] = 1
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", id), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": startUsage,
	}})
	sse(w, "ping", map[string]any{"type": "ping"})
	index := 0
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for i, frag := range fragments(reply.Text) {
			if reply.CutAfter > 0 && i == reply.CutAfter {
				panic(http.ErrAbortHandler)
			}
			if reply.FragmentDelay > 0 {
				time.Sleep(reply.FragmentDelay)
			}
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": frag}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, tc := range reply.ToolCalls {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": anthropicToolID(tc, i, id), "name": tc.Name, "input": map[string]any{}}})
		for _, part := range halves(tc.Arguments) {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if reply.CutAfter > 0 {
		panic(http.ErrAbortHandler) // cut before the end even if the text was short
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStopReason(reply), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": usage.CompletionTokens}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
