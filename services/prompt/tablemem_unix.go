//go:build unix

package prompt

import "syscall"

// tableMemory returns n zeroed bytes for a rank table, mapped outside the Go
// heap (anonymous, private), and the function that unmaps them. If the
// mapping fails it falls back to the heap (free is nil then).
func tableMemory(n int) (mem []byte, free func()) {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n), nil
	}
	return mem, func() { _ = syscall.Munmap(mem) }
}
