package llm

// SetEncodedCache turns the cache of encoded request parts on or off and
// empties it.
func SetEncodedCache(on bool) {
	encoded.mu.Lock()
	defer encoded.mu.Unlock()
	encoded.off = !on
	encoded.m, encoded.bytes = nil, 0
}

// EncodedCacheLen is the number of encoded parts kept.
func EncodedCacheLen() int {
	encoded.mu.Lock()
	defer encoded.mu.Unlock()
	return len(encoded.m)
}
