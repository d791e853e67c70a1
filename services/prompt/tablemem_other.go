//go:build !unix

package prompt

// tableMemory returns n zeroed bytes for a rank table; on this platform they
// are on the Go heap (free is nil).
func tableMemory(n int) (mem []byte, free func()) { return make([]byte, n), nil }
