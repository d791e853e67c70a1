package llm

import (
	"bytes"
	"encoding/json"

	"github.com/switchboard/switchboard/services"
)

// The Anthropic request is made the way the OpenAI one is (encoded.go):
// the small parameters (max_tokens, model, temperature, stop_sequences)
// are encoded each time, and the system blocks, the tool definitions and
// each message's content blocks are spliced in from the JSON they were
// given before, kept by a hash of what they were made from and whether
// their last block carries the cache breakpoint. Messages of one role in a
// row are merged into one API message (writeMessages); the bytes are those
// Anthropic's SDK sent (TestAnthropicEncodedPartsAreTheSDKsBytes).

// anthropicBody is the request body for req, "stream":true last when
// streamed.
func (p *Anthropic) anthropicBody(req Request, stream bool) ([]byte, error) {
	head := anthropicHead{MaxTokens: req.MaxTokens, Model: p.model, Temperature: req.Temperature, StopSequences: req.Stop}
	if head.MaxTokens <= 0 {
		head.MaxTokens = DefaultMaxTokens
	}
	if len(head.StopSequences) == 0 {
		head.StopSequences = nil
	}
	raw, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	system, err := anthropicSystemJSON(req)
	if err != nil {
		return nil, err
	}
	tools, err := anthropicToolsJSON(req)
	if err != nil {
		return nil, err
	}
	parts, err := anthropicMessageParts(req, len(system) > 0 || len(tools) > 0)
	if err != nil {
		return nil, err
	}
	body := spliceAnthropic(raw, parts, system, tools)
	if stream {
		body = append(body[:len(body)-1], `,"stream":true}`...)
	}
	return body, nil
}

// spliceAnthropic writes the body in the field order Anthropic's SDK used,
// max_tokens (always there) first, then messages, the
// fields head holds, system, and tools last (the fields between system and
// tools, thinking and tool_choice, are never set).
func spliceAnthropic(head []byte, messages []messagePart, system, tools [][]byte) []byte {
	head = bytes.TrimSpace(head)
	// The end of max_tokens: its digits run to the next ',' or '}'.
	cut := bytes.IndexAny(head, ",}")
	n := len(head) + 64 + partsLen(system) + partsLen(tools)
	for _, m := range messages {
		n += len(m.blocks) + 32
	}
	var b bytes.Buffer
	b.Grow(n)
	b.Write(head[:cut])
	if len(messages) > 0 {
		b.WriteString(`,"messages":[`)
		writeMessages(&b, messages)
		b.WriteByte(']')
	}
	b.Write(head[cut : len(head)-1])
	for _, f := range []struct {
		name  string
		parts [][]byte
	}{{"system", system}, {"tools", tools}} {
		if len(f.parts) == 0 {
			continue
		}
		b.WriteString(`,"` + f.name + `":[`)
		b.Write(bytes.Join(f.parts, []byte{','}))
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.Bytes()
}

func partsLen(parts [][]byte) int {
	n := len(parts)
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// anthropicSystemJSON is the JSON of each system block (anthropicSystem).
func anthropicSystemJSON(req Request) ([][]byte, error) {
	var out [][]byte
	for i, block := range anthropicSystem(req) {
		cached := req.CacheSystem && i == 0 && req.System != ""
		k := newKeyer("anthropic-system").str(block.Text).str(boolStr(cached)).key()
		raw, err := keptJSON(k, true, func() ([]byte, error) { return json.Marshal(block) })
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// anthropicToolsJSON is the JSON of each tool definition (anthropicTools).
func anthropicToolsJSON(req Request) ([][]byte, error) {
	var out [][]byte
	for i, t := range req.Tools {
		cached := req.CacheSystem && req.System == "" && i == len(req.Tools)-1
		k := newKeyer("anthropic-tool").str(t.Name).str(t.Description).str(string(t.Parameters)).str(boolStr(cached)).key()
		raw, err := keptJSON(k, true, func() ([]byte, error) {
			tools, err := anthropicTools(Request{Tools: []services.ToolSpec{t}, CacheSystem: cached})
			if err != nil {
				return nil, err
			}
			return json.Marshal(tools[0])
		})
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// blockCount is how many content blocks anthropicBlocks makes of m.
func blockCount(m Message) int {
	n := 0
	if m.Content != "" {
		n++
	}
	switch m.Role {
	case RoleUser:
		return n + len(m.Images)
	case RoleAssistant:
		return n + len(m.ToolCalls)
	default:
		return 1 // a tool result, or a role anthropicBlocks refuses
	}
}

func btoiLLM(b bool) int {
	if b {
		return 1
	}
	return 0
}

// anthropicMarked is which messages' last blocks carry a cache breakpoint:
// markCachePoints' choice (req.CacheAt and the last message, within the
// API's limit; a message without blocks marks the last block before it).
func anthropicMarked(req Request, prefixMarked bool) []bool {
	marked := make([]bool, len(req.Messages))
	if !req.CacheSystem {
		return marked
	}
	used := btoiLLM(prefixMarked)
	points := append([]int(nil), req.CacheAt...)
	if n := len(req.Messages); n > 0 && (len(points) == 0 || points[len(points)-1] != n-1) {
		points = append(points, n-1)
	}
	if extra := len(points) - (maxCachePoints - used); extra > 0 {
		points = points[extra:]
	}
	for _, i := range points {
		if i < 0 || i >= len(req.Messages) {
			continue
		}
		for j := i; j >= 0; j-- {
			if blockCount(req.Messages[j]) > 0 {
				marked[j] = true
				break
			}
		}
	}
	return marked
}

// messagePart is the JSON of one message's content blocks (joined by
// commas) and the role of the API message they go in.
type messagePart struct {
	role   string
	blocks []byte
}

// anthropicMessageParts is each message's kept blocks, then the response
// format's instruction when asked for.
func anthropicMessageParts(req Request, prefixMarked bool) ([]messagePart, error) {
	marked := anthropicMarked(req, prefixMarked)
	parts := make([]messagePart, 0, len(req.Messages)+1)
	for i, m := range req.Messages {
		if blockCount(m) == 0 {
			continue
		}
		r := roleUser
		if m.Role == RoleAssistant {
			r = roleAssistant
		}
		var k encodedKey
		kr := messageKeyer("anthropic-message", m)
		keep := kr != nil
		if keep {
			k = kr.str(boolStr(marked[i])).key()
		}
		raw, err := keptJSON(k, keep, func() ([]byte, error) { return anthropicBlocksJSON(i, m, marked[i]) })
		if err != nil {
			return nil, err
		}
		parts = append(parts, messagePart{r, raw})
	}
	if text := responseFormatInstruction(req.ResponseFormat); text != "" {
		raw, err := json.Marshal(textBlock(text))
		if err != nil {
			return nil, err
		}
		parts = append(parts, messagePart{roleUser, raw})
	}
	return parts, nil
}

// writeMessages writes the API messages: parts of one role in a row are
// merged into one, {"content":[...],"role":...}.
func writeMessages(b *bytes.Buffer, parts []messagePart) {
	for i, p := range parts {
		switch {
		case i > 0 && parts[i-1].role == p.role:
			b.WriteByte(',')
		case i > 0:
			closeMessage(b, parts[i-1].role)
			b.WriteString(`,{"content":[`)
		default:
			b.WriteString(`{"content":[`)
		}
		b.Write(p.blocks)
	}
	if n := len(parts); n > 0 {
		closeMessage(b, parts[n-1].role)
	}
}

func closeMessage(b *bytes.Buffer, role string) {
	b.WriteString(`],"role":"`)
	b.WriteString(string(role))
	b.WriteString(`"}`)
}

// anthropicBlocksJSON is the JSON of message i's blocks, joined by commas,
// the last with the cache breakpoint when marked.
func anthropicBlocksJSON(i int, m Message, marked bool) ([]byte, error) {
	_, blocks, err := anthropicBlocks(i, m)
	if err != nil {
		return nil, err
	}
	if marked && len(blocks) > 0 {
		setCacheControl(blocks[len(blocks)-1])
	}
	var b bytes.Buffer
	for j, block := range blocks {
		raw, err := json.Marshal(block)
		if err != nil {
			return nil, err
		}
		if j > 0 {
			b.WriteByte(',')
		}
		b.Write(raw)
	}
	return b.Bytes(), nil
}
