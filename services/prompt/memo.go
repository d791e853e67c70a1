package prompt

import (
	"hash/maphash"
	"sync"

	"github.com/switchboard/switchboard/services"
)

// A turn's prompt is mostly text the previous turn's prompt had too: the
// system prompt, the tool definitions, the rules and settings layers, and
// history rows whose metadata is decoded to place them. Counting tokens
// (the BPE split pattern runs at ~1.5 MB/s) and decoding JSON again on
// every build was most of a build's CPU; both are pure functions of their
// input, so they are remembered, by a 64-bit hash of the input, in small
// bounded tables that start over when full.

// memoEntries bounds each table (a few hundred KiB at most).
const memoEntries = 8192

// memoMinBytes: shorter texts are counted directly. Even a tool's name is
// remembered: every call of the BPE split pattern (regexp2) costs
// microseconds of set-up whatever the text's length, against nanoseconds
// to hash it, and a turn counts about a hundred short texts (tool names,
// argument names, framing) that every turn counts again.
const memoMinBytes = 1

var memoSeed = maphash.MakeSeed()

// memo is a bounded table of remembered values, safe for concurrent use;
// it starts over when full.
type memo[V any] struct {
	mu sync.Mutex
	m  map[memoKey]V
}

type memoKey struct {
	hash uint64
	n    int
}

func keyOf(s string) memoKey      { return memoKey{maphash.String(memoSeed, s), len(s)} }
func keyOfBytes(b []byte) memoKey { return memoKey{maphash.Bytes(memoSeed, b), len(b)} }

func (m *memo[V]) get(k memoKey) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

func (m *memo[V]) put(k memoKey, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= memoEntries {
		m.m = make(map[memoKey]V)
	}
	m.m[k] = v
}

func (m *memo[V]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// memoTokenizer remembers the counts of texts it has counted.
type memoTokenizer struct {
	Tokenizer
	counts memo[int]
}

// Memo returns t with its counts of texts of memoMinBytes or more
// remembered. Memo of a memo returns it unchanged.
func Memo(t Tokenizer) Tokenizer {
	if m, ok := t.(*memoTokenizer); ok {
		return m
	}
	return &memoTokenizer{Tokenizer: t}
}

// Count returns t's count of text.
func (m *memoTokenizer) Count(text string) int {
	if len(text) < memoMinBytes {
		return m.Tokenizer.Count(text)
	}
	k := keyOf(text)
	if n, ok := m.counts.get(k); ok {
		return n
	}
	n := m.Tokenizer.Count(text)
	m.counts.put(k, n)
	return n
}

// metaOf is msg's metadata, decoded when the store read the row.
func metaOf(msg services.Message) services.MessageMeta { return msg.Meta }

// canonicalParams remembers canonicalJSON of tool parameters (the same
// twenty schemas every turn).
var canonicalParams memo[[]byte]

func canonicalJSONMemo(raw []byte) []byte {
	k := keyOfBytes(raw)
	if b, ok := canonicalParams.get(k); ok {
		return b
	}
	b := canonicalJSON(raw)
	canonicalParams.put(k, b)
	return b
}
