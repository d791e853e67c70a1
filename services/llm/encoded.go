package llm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"strconv"
	"sync"
)

// A turn's request repeats the previous turn's almost entirely: the system
// prompt, the tool definitions and the history, byte for byte (the prompt
// is built so that providers can cache it). Encoding every part anew each
// turn was, with the provider SDKs this package once used, the largest CPU
// cost of a turn after prompt building. The JSON of a message or a tool
// definition is therefore kept, by a 128-bit hash of what it was made
// from, and the body is the encoding of the other parameters with the
// kept parts spliced in: the same bytes as made from scratch, and as the
// SDKs sent (TestEncodedPartsAreTheSDKsBytes, testdata/sdkbodies), without
// encoding the history every turn.

// encodedMaxBytes bounds the JSON kept; the table starts over when full.
const encodedMaxBytes = 2 << 20

// encodedRotate is how many lookups a generation of the table lasts. A
// part is kept while requests use it: one used in the current or the
// previous generation (the last 4,096 to 8,192 lookups, some fifty to a
// hundred requests of a long conversation with twenty tools) stays, and
// the rest (messages that left every conversation's window, the parts of
// conversations that went quiet) go when the generation after the one
// that last used them ends, instead of filling the table to its bound.
const encodedRotate = 4096

type encodedKey struct{ a, b uint64 }

var encodedSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// encodedCache maps a part's key to its JSON, in two generations: cur
// (parts put or used since the last rotation) and old (the generation
// before).
type encodedCache struct {
	mu                 sync.Mutex
	cur, old           map[encodedKey][]byte
	curBytes, oldBytes int
	lookups            int
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
	c.lookups++
	if c.lookups >= encodedRotate {
		c.old, c.oldBytes = c.cur, c.curBytes
		c.cur, c.curBytes, c.lookups = nil, 0, 0
	}
	if b, ok := c.cur[k]; ok {
		return b, true
	}
	b, ok := c.old[k]
	if ok {
		// Used again: into the current generation.
		delete(c.old, k)
		c.oldBytes -= len(b)
		c.add(k, b)
	}
	return b, ok
}

func (c *encodedCache) put(k encodedKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off || len(b) > encodedMaxBytes/8 {
		return
	}
	if c.curBytes+c.oldBytes+len(b) > encodedMaxBytes {
		c.cur, c.old, c.curBytes, c.oldBytes = nil, nil, 0, 0
	}
	c.add(k, b)
}

func (c *encodedCache) add(k encodedKey, b []byte) {
	if c.cur == nil {
		c.cur = make(map[encodedKey][]byte)
	}
	c.cur[k] = b
	c.curBytes += len(b)
}

// keyer hashes the fields of one part, each length-prefixed. Keyers are
// pooled (a request makes one per message): key returns it to the pool.
type keyer struct{ h [2]maphash.Hash }

var keyers = sync.Pool{New: func() any {
	k := &keyer{}
	for i := range k.h {
		k.h[i].SetSeed(encodedSeeds[i])
	}
	return k
}}

func newKeyer(kind string) *keyer {
	k := keyers.Get().(*keyer)
	for i := range k.h {
		k.h[i].Reset()
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

// key is the hash of what was written; k goes back to the pool.
func (k *keyer) key() encodedKey {
	out := encodedKey{k.h[0].Sum64(), k.h[1].Sum64()}
	keyers.Put(k)
	return out
}

// messageKey is the key of a message without images; ok is false for one
// with images (sent as they are, not kept).
func messageKey(m Message) (encodedKey, bool) {
	k := messageKeyer("message", m)
	if k == nil {
		return encodedKey{}, false
	}
	return k.key(), true
}

// messageKeyer hashes kind and the fields of a message without images
// (nil for one with images).
func messageKeyer(kind string, m Message) *keyer {
	if len(m.Images) > 0 {
		return nil
	}
	k := newKeyer(kind).str(string(m.Role)).str(m.Content).str(m.ToolCallID)
	if m.IsError {
		k.str("error")
	} else {
		k.str("")
	}
	k.str(strconv.Itoa(len(m.ToolCalls)))
	for _, tc := range m.ToolCalls {
		k.str(tc.ID).str(tc.Name).str(string(tc.Arguments))
	}
	return k
}

// keptJSON is the JSON encode makes, kept under k when keep.
func keptJSON(k encodedKey, keep bool, encode func() ([]byte, error)) ([]byte, error) {
	if keep {
		if raw, ok := encoded.get(k); ok {
			return raw, nil
		}
	}
	raw, err := encode()
	if err == nil && keep {
		encoded.put(k, raw)
	}
	return raw, err
}

// splicing reports whether request bodies are made from kept parts.
func splicing() bool {
	encoded.mu.Lock()
	defer encoded.mu.Unlock()
	return !encoded.off
}

// openAIRequest collects a request's messages and tool definitions as
// their JSON (kept under their keys when splice is set, the usual case;
// made anew each time when not) and the other parameters in head.
type openAIRequest struct {
	head            openAIHead
	splice, stream  bool
	messages, tools [][]byte
}

// message adds the message build makes, kept under k when keep.
func (r *openAIRequest) message(k encodedKey, keep bool, build func() (any, error)) error {
	return addPart(k, keep && r.splice, build, &r.messages)
}

// tool adds the tool definition build makes.
func (r *openAIRequest) tool(name, description string, parameters []byte, build func() (any, error)) error {
	k := newKeyer("tool").str(name).str(description).str(string(parameters)).key()
	return addPart(k, r.splice, build, &r.tools)
}

// addPart appends the JSON of what build makes (kept under k when keep) to
// raws.
func addPart(k encodedKey, keep bool, build func() (any, error), raws *[][]byte) error {
	raw, err := keptJSON(k, keep, func() ([]byte, error) {
		v, err := build()
		if err != nil {
			return nil, err
		}
		return marshalOpenAI(v)
	})
	if err == nil {
		*raws = append(*raws, raw)
	}
	return err
}

// marshalOpenAI is v's JSON as OpenAI's SDK wrote it: map keys sorted, '<',
// '>' and '&' not escaped.
func marshalOpenAI(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// body is the request body: "messages" first, the other parameters, then
// "tools", and "stream":true last for a streamed reply (the order of the
// SDK this replaced, so the bytes servers cache stay the same).
func (r *openAIRequest) body() ([]byte, error) {
	head, err := marshalOpenAI(r.head)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(head) + 64*len(r.messages) + 512*len(r.tools))
	b.WriteByte('{')
	field := func(name string, parts [][]byte) {
		if len(parts) == 0 {
			return
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + name + `":[`)
		for i, p := range parts {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(p)
		}
		b.WriteByte(']')
	}
	field("messages", r.messages)
	if inner := bytes.TrimSpace(head); len(inner) > 2 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(inner[1 : len(inner)-1])
	}
	field("tools", r.tools)
	if r.stream {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"stream":true`)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
