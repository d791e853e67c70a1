package llmtest

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// PromptCache applies a provider's prompt-caching rules to the requests it
// sees, so a benchmark or test can measure how much of a prompt a real
// provider would read from its cache. Tokens are the fake's estimate,
// bytes/4 of a canonical form of the request (each tool, system block and
// message content block as JSON with sorted keys, cache_control removed).
//
// Anthropic (explicit breakpoints): a block with cache_control marks the
// end of a cacheable prefix, in the order tools, system, messages; at most
// 4 breakpoints (more is a 400, as with the API). A request reads the
// longest breakpoint prefix written by an earlier request, and writes every
// breakpoint prefix it carries; a prefix shorter than MinTokens (1,024, the
// Sonnet-class minimum) is neither read nor written. Reported as
// cache_read_input_tokens and cache_creation_input_tokens (the tokens from
// the read prefix to the last breakpoint). Automatic lookback to earlier
// block boundaries is not modelled: a prefix is found only at a breakpoint.
//
// OpenAI (automatic): the longest common prefix with an earlier request
// (tools, then messages), at least MinTokens, counted in steps of 128
// tokens, reported as prompt_tokens_details.cached_tokens.
//
// A PromptCache is safe for concurrent use; entries never expire.
type PromptCache struct {
	// MinTokens is the shortest cacheable prefix (default 1,024).
	MinTokens int

	mu        sync.Mutex
	anthropic map[[32]byte]bool
	openai    map[[32]byte]bool
}

// NewPromptCache returns an empty cache with the default minimum.
func NewPromptCache() *PromptCache {
	return &PromptCache{MinTokens: 1024, anthropic: map[[32]byte]bool{}, openai: map[[32]byte]bool{}}
}

// openAIStep is OpenAI's cache granularity, in tokens; a token is 4 bytes.
const openAIStep = 128

// ErrTooManyBreakpoints is the message a request with more than four
// cache_control blocks is refused with.
const ErrTooManyBreakpoints = "A maximum of 4 blocks with cache_control may be provided."

// Usage returns the prompt usage of body under api's rules (PromptTokens,
// CachedTokens, CacheWriteTokens; CompletionTokens is left 0), and records
// the prefixes the request writes. An Anthropic request with more than 4
// breakpoints returns ok false.
func (c *PromptCache) Usage(api API, model string, body []byte) (u Usage, ok bool) {
	if api == Anthropic {
		return c.anthropicUsage(model, body)
	}
	return c.openAIUsage(model, body), true
}

// block is one canonical piece of a request and whether it is a breakpoint.
type block struct {
	data       []byte
	breakpoint bool
}

// canonical re-encodes a JSON value with sorted keys and without
// cache_control, reporting whether it had one.
func canonical(raw json.RawMessage) ([]byte, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw, false
	}
	bp := false
	if m, ok := v.(map[string]any); ok {
		if _, has := m["cache_control"]; has {
			bp = true
			delete(m, "cache_control")
		}
	}
	b, _ := json.Marshal(v)
	return b, bp
}

// contentBlocks splits a system or message content value (a string or an
// array of blocks) into canonical blocks.
func contentBlocks(prefix string, raw json.RawMessage) []block {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		b, _ := canonical(raw)
		return []block{{data: append([]byte(prefix), b...)}}
	}
	out := make([]block, 0, len(list))
	for _, item := range list {
		b, bp := canonical(item)
		out = append(out, block{data: append([]byte(prefix), b...), breakpoint: bp})
	}
	return out
}

func (c *PromptCache) anthropicUsage(model string, body []byte) (Usage, bool) {
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		System   json.RawMessage   `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return Usage{PromptTokens: max(1, len(body)/4)}, true
	}
	var blocks []block
	for _, t := range req.Tools {
		b, bp := canonical(t)
		blocks = append(blocks, block{data: append([]byte("tool:"), b...), breakpoint: bp})
	}
	if len(req.System) > 0 {
		blocks = append(blocks, contentBlocks("system:", req.System)...)
	}
	for _, m := range req.Messages {
		blocks = append(blocks, contentBlocks(m.Role+":", m.Content)...)
	}
	h := sha256.New()
	h.Write([]byte(model))
	size, breakpoints := 0, 0
	type point struct {
		key    [32]byte
		tokens int
	}
	var points []point
	for _, b := range blocks {
		h.Write(b.data)
		size += len(b.data)
		if b.breakpoint {
			breakpoints++
			var key [32]byte
			copy(key[:], h.Sum(nil))
			points = append(points, point{key, size / 4})
		}
	}
	if breakpoints > 4 {
		return Usage{}, false
	}
	u := Usage{PromptTokens: max(1, size/4)}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range points {
		if p.tokens >= c.MinTokens && c.anthropic[p.key] {
			u.CachedTokens = p.tokens // the longest one wins: points grow
		}
	}
	for _, p := range points {
		if p.tokens >= c.MinTokens && !c.anthropic[p.key] {
			c.anthropic[p.key] = true
			u.CacheWriteTokens = p.tokens - u.CachedTokens
		}
	}
	return u, true
}

func (c *PromptCache) openAIUsage(model string, body []byte) Usage {
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return Usage{PromptTokens: max(1, len(body)/4)}
	}
	var seq []byte
	for _, t := range req.Tools {
		b, _ := canonical(t)
		seq = append(seq, b...)
	}
	for _, m := range req.Messages {
		b, _ := canonical(m)
		seq = append(seq, b...)
	}
	// A chained hash per 128-token step: step k's key covers the first
	// k×512 bytes, so equal keys mean equal prefixes.
	const stepBytes = openAIStep * 4
	var keys [][32]byte
	prev := sha256.Sum256([]byte(model))
	for end := stepBytes; end <= len(seq); end += stepBytes {
		prev = sha256.Sum256(append(prev[:], seq[end-stepBytes:end]...))
		keys = append(keys, prev)
	}
	u := Usage{PromptTokens: max(1, len(seq)/4)}
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for hit < len(keys) && c.openai[keys[hit]] {
		hit++
	}
	if tokens := hit * openAIStep; tokens >= c.MinTokens {
		u.CachedTokens = tokens
	}
	for _, k := range keys {
		c.openai[k] = true
	}
	return u
}
