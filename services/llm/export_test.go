package llm

import "fmt"

// SetEncodedCache turns the cache of encoded request parts on or off and
// empties it.
func SetEncodedCache(on bool) {
	encoded.mu.Lock()
	defer encoded.mu.Unlock()
	encoded.off = !on
	encoded.cur, encoded.old, encoded.curBytes, encoded.oldBytes, encoded.lookups = nil, nil, 0, 0, 0
}

// EncodedCacheLen is the number of encoded parts kept.
func EncodedCacheLen() int {
	encoded.mu.Lock()
	defer encoded.mu.Unlock()
	return len(encoded.cur) + len(encoded.old)
}

// EncodedCacheBytes is the bytes of JSON kept.
func EncodedCacheBytes() int {
	encoded.mu.Lock()
	defer encoded.mu.Unlock()
	return encoded.curBytes + encoded.oldBytes
}

// EncodedRotate is how many lookups a generation of the cache lasts.
const EncodedRotate = encodedRotate

// RequestBody is the body p's Complete sends for req (not streamed): from
// kept parts when the cache is on, made from scratch when it is off. A
// provider New made is looked at through its retries.
func RequestBody(p Provider, req Request) ([]byte, error) {
	if r, ok := p.(*Retrying); ok {
		p = r.Provider
	}
	switch p := p.(type) {
	case *OpenAI:
		r, err := p.request(req, false)
		if err != nil {
			return nil, err
		}
		return r.body()
	case *Anthropic:
		return p.anthropicBody(req, false)
	}
	return nil, fmt.Errorf("RequestBody: %T is not a provider of this package", p)
}
