package prompt

import (
	"strings"
	"sync"
	"unicode"

	"github.com/switchboard/switchboard/services"
)

// Tokenizer counts prompt tokens. Implementations are safe for concurrent use.
// Counting runs at roughly 1.5 MB/s (the split pattern), so callers count a message once and store
// the number rather than re-counting on every prompt build.
type Tokenizer interface {
	// Count returns the number of tokens text encodes to; 0 for "".
	Count(text string) int
	// CountMessage returns the tokens one chat message costs: its content, its
	// role and the per-message framing (MessageOverhead).
	CountMessage(role, content string) int
}

// MessageOverhead is the framing every chat message costs on top of its role
// and content tokens (OpenAI's published accounting: 3 tokens per message, so
// about 4 with a one-token role such as "user").
const MessageOverhead = 3

// Encoding names used by NewTokenizer.
const (
	EncodingO200k  = "o200k_base"
	EncodingCL100k = "cl100k_base"
)

// o200kFamilies are model-name prefixes that use o200k_base. A prefix matches
// only at a boundary ("o1" matches "o1-mini", not "o10").
var o200kFamilies = []string{
	"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss",
	"o1", "o3", "o4",
}

// EncodingForModel returns the tiktoken encoding NewTokenizer uses for model:
// o200k_base for the gpt-4o, gpt-4.1, gpt-5 and o-series families, cl100k_base
// for everything else. For models that are not OpenAI's (claude, llama, qwen,
// ...) cl100k_base is only an estimate, typically within 10–20%. A provider
// prefix such as "openai/" is ignored.
func EncodingForModel(model string) string {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	for _, p := range o200kFamilies {
		if !strings.HasPrefix(name, p) {
			continue
		}
		if len(name) == len(p) || strings.ContainsRune("-.:_@", rune(name[len(p)])) {
			return EncodingO200k
		}
	}
	return EncodingCL100k
}

// encoders caches one loaded encoding per name for the life of the process:
// loading builds the rank table from the embedded rank file (~5 MiB for
// o200k_base, tens of milliseconds), so it runs lazily and once. A failed
// load is cached too: the encodings are embedded, so a failure would not go
// away on retry.
var encoders = map[string]*lazyEncoding{
	EncodingO200k:  {name: EncodingO200k},
	EncodingCL100k: {name: EncodingCL100k},
}

type lazyEncoding struct {
	name string
	once sync.Once
	enc  *bpeEncoding
	err  error
}

func (l *lazyEncoding) load() (*bpeEncoding, error) {
	l.once.Do(func() { l.enc, l.err = loadBPE(l.name) })
	return l.enc, l.err
}

// NewTokenizer returns the tokenizer for model (see EncodingForModel). The
// encoding is loaded on first use and shared by every caller. If it cannot be
// loaded, NewTokenizer returns a HeuristicTokenizer together with a warning: a
// *services.Error with code CodeBudgetFallback. The tokenizer is usable in both
// cases; the warning is for logs and the run's observability columns.
func NewTokenizer(model string) (Tokenizer, error) {
	enc := EncodingForModel(model)
	return newTokenizer(enc, encoders[enc].load)
}

func newTokenizer(enc string, load func() (*bpeEncoding, error)) (Tokenizer, error) {
	e, err := load()
	if err != nil || e == nil {
		return HeuristicTokenizer{}, &services.Error{
			Kind:    services.EUNAVAILABLE,
			Code:    CodeBudgetFallback,
			Message: "tokenizer " + enc + " unavailable, token counts are estimates",
			Err:     err,
		}
	}
	return bpeTokenizer{e: e}, nil
}

// NewLazyTokenizer returns the tokenizer for model (see EncodingForModel)
// without loading its encoding: the encoding (~5 MiB of heap, tens of
// milliseconds to build) is loaded by the first Count, so a server starts fast and small
// until its first message. If the load fails, counts fall back to
// HeuristicTokenizer and onFallback (may be nil) gets NewTokenizer's
// warning, once.
func NewLazyTokenizer(model string, onFallback func(error)) Tokenizer {
	enc := EncodingForModel(model)
	return &lazyTokenizer{enc: enc, load: encoders[enc].load, onFallback: onFallback}
}

type lazyTokenizer struct {
	enc        string
	load       func() (*bpeEncoding, error)
	onFallback func(error)
	once       sync.Once
	tok        Tokenizer
}

func (l *lazyTokenizer) get() Tokenizer {
	l.once.Do(func() {
		var warn error
		l.tok, warn = newTokenizer(l.enc, l.load)
		if warn != nil && l.onFallback != nil {
			l.onFallback(warn)
		}
	})
	return l.tok
}

// Count loads the encoding on first use, then counts as NewTokenizer's does.
func (l *lazyTokenizer) Count(text string) int {
	if text == "" {
		return 0
	}
	return l.get().Count(text)
}

// CountMessage loads the encoding on first use, then counts as NewTokenizer's does.
func (l *lazyTokenizer) CountMessage(role, content string) int {
	return l.get().CountMessage(role, content)
}

// HeuristicTokenizer estimates tokens without an encoding: one token per CJK
// (Han, kana, Hangul) rune and one per four other runes, rounded up. It is the
// fallback when an encoding cannot be loaded; it tends to overestimate code
// and underestimate text with many rare words.
type HeuristicTokenizer struct{}

// Count returns the estimated tokens of text; 0 for "".
func (HeuristicTokenizer) Count(text string) int {
	cjk, other := 0, 0
	for _, r := range text {
		if isCJK(r) {
			cjk++
		} else {
			other++
		}
	}
	return cjk + (other+3)/4
}

// CountMessage returns the estimated tokens of one chat message, framing included.
func (h HeuristicTokenizer) CountMessage(role, content string) int {
	return MessageOverhead + h.Count(role) + h.Count(content)
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}
