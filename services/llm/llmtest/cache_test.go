package llmtest

import (
	"encoding/json"
	"strings"
	"testing"
)

func anthropicBody(t *testing.T, system string, msgs []string, marks ...int) []byte {
	t.Helper()
	var ms []map[string]any
	for i, text := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		block := map[string]any{"type": "text", "text": text}
		for _, m := range marks {
			if m == i {
				block["cache_control"] = map[string]any{"type": "ephemeral"}
			}
		}
		ms = append(ms, map[string]any{"role": role, "content": []any{block}})
	}
	b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100,
		"system":   []any{map[string]any{"type": "text", "text": system, "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": ms})
	return b
}

// TestPromptCacheAnthropicRules: a request reads the longest breakpoint
// prefix an earlier one wrote and writes the rest up to its last
// breakpoint; a prefix under 1,024 tokens is neither; more than four
// breakpoints are refused.
func TestPromptCacheAnthropicRules(t *testing.T) {
	c := NewPromptCache()
	long := strings.Repeat("stable system prompt ", 300) // ~1,575 tokens
	first, _ := c.Usage(Anthropic, "m", anthropicBody(t, long, []string{"hello", "hi", "next"}, 1))
	if first.CachedTokens != 0 || first.CacheWriteTokens == 0 || first.CacheWriteTokens > first.PromptTokens {
		t.Fatalf("first request = %+v, want a write and no read", first)
	}
	second, _ := c.Usage(Anthropic, "m", anthropicBody(t, long, []string{"hello", "hi", "next", "ok", "more"}, 1, 3))
	if second.CachedTokens != first.CacheWriteTokens {
		t.Errorf("second read %d, want the first's breakpoint prefix %d", second.CachedTokens, first.CacheWriteTokens)
	}
	if second.CacheWriteTokens <= 0 || second.CachedTokens+second.CacheWriteTokens > second.PromptTokens {
		t.Errorf("second = %+v, want the new tail written", second)
	}
	// A changed message before the breakpoint: only the system prefix reads.
	third, _ := c.Usage(Anthropic, "m", anthropicBody(t, long, []string{"HELLO", "hi", "next"}, 1))
	if third.CachedTokens == 0 || third.CachedTokens >= first.CacheWriteTokens {
		t.Errorf("changed history read %d, want the system prefix only (< %d)", third.CachedTokens, first.CacheWriteTokens)
	}
	// Another model has its own cache.
	if u, _ := c.Usage(Anthropic, "other", anthropicBody(t, long, []string{"hello", "hi", "next"}, 1)); u.CachedTokens != 0 {
		t.Errorf("another model read %d", u.CachedTokens)
	}
	// Short prefixes are not cached.
	c.Usage(Anthropic, "m", anthropicBody(t, "short", []string{"a", "b", "c"}, 1))
	if u, _ := c.Usage(Anthropic, "m", anthropicBody(t, "short", []string{"a", "b", "c"}, 1)); u.CachedTokens != 0 || u.CacheWriteTokens != 0 {
		t.Errorf("a prefix under 1,024 tokens = %+v, want neither read nor write", u)
	}
	if _, ok := c.Usage(Anthropic, "m", anthropicBody(t, long, []string{"a", "b", "c", "d", "e"}, 0, 1, 2, 3)); ok {
		t.Error("five breakpoints accepted")
	}
}

// TestPromptCacheOpenAIRules: the longest common prefix with any earlier
// request, in 128-token steps, from 1,024 tokens.
func TestPromptCacheOpenAIRules(t *testing.T) {
	c := NewPromptCache()
	body := func(msgs ...string) []byte {
		var ms []map[string]any
		for _, m := range msgs {
			ms = append(ms, map[string]any{"role": "user", "content": m})
		}
		b, _ := json.Marshal(map[string]any{"model": "gpt", "messages": ms})
		return b
	}
	long := strings.Repeat("x", 8000) // 2,000 tokens
	if u, _ := c.Usage(OpenAI, "gpt", body(long, "one")); u.CachedTokens != 0 {
		t.Fatalf("first request read %d", u.CachedTokens)
	}
	u, _ := c.Usage(OpenAI, "gpt", body(long, "two"))
	if u.CachedTokens < 1024 || u.CachedTokens%128 != 0 || u.CachedTokens > 2000 || u.CachedTokens < 2000-128 {
		t.Errorf("shared 2,000-token prefix read %d, want the largest multiple of 128 below it", u.CachedTokens)
	}
	if u, _ := c.Usage(OpenAI, "gpt", body(strings.Repeat("y", 3000), "a")); u.CachedTokens != 0 {
		t.Errorf("a new prefix read %d", u.CachedTokens)
	}
	if u, _ := c.Usage(OpenAI, "gpt", body(strings.Repeat("y", 3000), "b")); u.CachedTokens != 0 {
		t.Errorf("a shared prefix under 1,024 tokens read %d", u.CachedTokens)
	}
}
