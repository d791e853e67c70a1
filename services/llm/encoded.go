package llm

import (
	"encoding/binary"
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
)

// A turn's request repeats the previous turn's almost entirely: the system
// prompt, the tool definitions and the history, byte for byte (the prompt
// is built so that providers can cache it). The SDK encodes its parameter
// types by reflection, several times over for nested unions, which was the
// largest CPU cost of a turn after prompt building. The JSON the SDK gave a
// message or a tool definition is therefore kept, by a 128-bit hash of
// what it was made from, and handed back to the SDK as that part's raw
// JSON (param.Override) the next time: the body on the wire is the same
// bytes (TestEncodedPartsAreTheSDKsBytes).

// encodedMaxBytes bounds the JSON kept; the table starts over when full.
const encodedMaxBytes = 2 << 20

type encodedKey struct{ a, b uint64 }

var encodedSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// encodedCache maps a part's key to its JSON.
type encodedCache struct {
	mu    sync.Mutex
	m     map[encodedKey][]byte
	bytes int
	// off disables the cache (tests compare with and without it).
	off bool
}

var encoded encodedCache

func (c *encodedCache) get(k encodedKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return nil, false
	}
	b, ok := c.m[k]
	return b, ok
}

func (c *encodedCache) put(k encodedKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off || len(b) > encodedMaxBytes/8 {
		return
	}
	if c.m == nil || c.bytes+len(b) > encodedMaxBytes {
		c.m, c.bytes = make(map[encodedKey][]byte), 0
	}
	c.m[k] = b
	c.bytes += len(b)
}

// keyer hashes the fields of one part, each length-prefixed.
type keyer struct{ h [2]maphash.Hash }

func newKeyer(kind string) *keyer {
	k := &keyer{}
	for i := range k.h {
		k.h[i].SetSeed(encodedSeeds[i])
	}
	k.str(kind)
	return k
}

func (k *keyer) str(s string) *keyer {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	for i := range k.h {
		k.h[i].Write(n[:])
		k.h[i].WriteString(s)
	}
	return k
}

func (k *keyer) key() encodedKey { return encodedKey{k.h[0].Sum64(), k.h[1].Sum64()} }

// messageKey is the key of a message without images; ok is false for one
// with images (sent as they are, not kept).
func messageKey(m Message) (encodedKey, bool) {
	if len(m.Images) > 0 {
		return encodedKey{}, false
	}
	k := newKeyer("message").str(string(m.Role)).str(m.Content).str(m.ToolCallID)
	if m.IsError {
		k.str("error")
	} else {
		k.str("")
	}
	k.str(strconv.Itoa(len(m.ToolCalls)))
	for _, tc := range m.ToolCalls {
		k.str(tc.ID).str(tc.Name).str(string(tc.Arguments))
	}
	return k.key(), true
}

// cachedMessage returns the message built by build, as raw JSON when it
// was encoded before.
func cachedMessage(k encodedKey, build func() (openai.ChatCompletionMessageParamUnion, error)) (openai.ChatCompletionMessageParamUnion, error) {
	if raw, ok := encoded.get(k); ok {
		return param.Override[openai.ChatCompletionMessageParamUnion](rawJSON(raw)), nil
	}
	u, err := build()
	if err != nil {
		return u, err
	}
	if raw, err := u.MarshalJSON(); err == nil {
		encoded.put(k, raw)
		return param.Override[openai.ChatCompletionMessageParamUnion](rawJSON(raw)), nil
	}
	return u, nil
}

// cachedTool is cachedMessage for a tool definition.
func cachedTool(name, description string, parameters []byte, build func() (openai.ChatCompletionToolUnionParam, error)) (openai.ChatCompletionToolUnionParam, error) {
	k := newKeyer("tool").str(name).str(description).str(string(parameters)).key()
	if raw, ok := encoded.get(k); ok {
		return param.Override[openai.ChatCompletionToolUnionParam](rawJSON(raw)), nil
	}
	u, err := build()
	if err != nil {
		return u, err
	}
	if raw, err := u.MarshalJSON(); err == nil {
		encoded.put(k, raw)
		return param.Override[openai.ChatCompletionToolUnionParam](rawJSON(raw)), nil
	}
	return u, nil
}

// rawJSON is JSON the encoder copies as it is.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
