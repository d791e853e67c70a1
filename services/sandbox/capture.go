package sandbox

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
)

// tailBytes of a stream are kept beside its head when it passes the cap:
// errors are usually at the end.
const tailBytes = 8 << 10

// Capture keeps what a stream wrote within a cap: the first bytes, and the
// last tailBytes when it passes the cap; it counts all of it.
type Capture struct {
	mu      sync.Mutex
	cap     int64
	head    []byte
	tail    []byte // ring of the last tailBytes once past the cap
	tailPos int
	total   int64
	lines   int64
	flood   int64
	onFlood func()
}

func newCapture(cap int64) *Capture {
	return &Capture{cap: cap}
}

func (c *Capture) withFlood(limit int64, f func()) *Capture {
	c.flood, c.onFlood = limit, f
	return c
}

// Write keeps p within the cap and never fails (the command must not see
// a broken pipe because of the service's cap).
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.total += int64(len(p))
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	rest := p
	if room := c.cap - int64(len(c.head)); room > 0 {
		n := min(int64(len(rest)), room)
		c.head = append(c.head, rest[:n]...)
		rest = rest[n:]
	}
	for len(rest) > 0 {
		if len(c.tail) < tailBytes {
			n := min(len(rest), tailBytes-len(c.tail))
			c.tail = append(c.tail, rest[:n]...)
			rest = rest[n:]
			continue
		}
		n := copy(c.tail[c.tailPos:], rest)
		c.tailPos = (c.tailPos + n) % tailBytes
		rest = rest[n:]
	}
	flooded := c.flood > 0 && c.total > c.flood && c.onFlood != nil
	f := c.onFlood
	c.mu.Unlock()
	if flooded {
		f()
	}
	return len(p), nil
}

// Total is the number of bytes the stream wrote.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Lines is the number of lines the stream wrote (a last line without a
// newline counts).
func (c *Capture) Lines() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.lines
	if c.total > 0 && !c.endsWithNewline() {
		n++
	}
	return n
}

func (c *Capture) endsWithNewline() bool {
	if len(c.tail) > 0 {
		i := (c.tailPos + len(c.tail) - 1) % len(c.tail)
		return c.tail[i] == '\n'
	}
	return len(c.head) > 0 && c.head[len(c.head)-1] == '\n'
}

// Truncated reports whether part of the stream was left out.
func (c *Capture) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(len(c.head)+len(c.tail))
}

func (c *Capture) tailBytes() []byte {
	if len(c.tail) < tailBytes {
		return append([]byte(nil), c.tail...)
	}
	return append(append([]byte(nil), c.tail[c.tailPos:]...), c.tail[:c.tailPos]...)
}

// String is the kept text: the whole stream within the cap, else its head,
// a marker naming what was left out, and its tail. Invalid UTF-8 is
// replaced.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= c.cap {
		return strings.ToValidUTF8(string(c.head), "\uFFFD")
	}
	head, tail := c.head, c.tailBytes()
	left := c.total - int64(len(head)) - int64(len(tail))
	if left == 0 {
		return strings.ToValidUTF8(string(head)+string(tail), "\uFFFD")
	}
	return strings.ToValidUTF8(string(head), "\uFFFD") +
		fmt.Sprintf("\n…[%d bytes left out: the stream wrote %d bytes, %s are kept]…\n", left, c.total, humanBytes(c.cap)) +
		strings.ToValidUTF8(string(tail), "\uFFFD")
}

// LastLines is the last n lines of what is kept.
func (c *Capture) LastLines(n int) string {
	s := strings.TrimRight(c.String(), "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
