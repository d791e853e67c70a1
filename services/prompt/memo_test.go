package prompt

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// countingTokenizer counts words and how often it was asked.
type countingTokenizer struct{ calls atomic.Int64 }

func (c *countingTokenizer) Count(text string) int {
	c.calls.Add(1)
	return len(strings.Fields(text))
}

func (c *countingTokenizer) CountMessage(role, content string) int {
	return MessageOverhead + c.Count(role) + c.Count(content)
}

func TestMemoCountsOnceAndStaysBounded(t *testing.T) {
	base := &countingTokenizer{}
	m := Memo(base)
	if Memo(m) != m {
		t.Fatal("Memo of a memo wraps it again")
	}
	long := strings.Repeat("tool description words ", 10)
	for range 3 {
		if got := m.Count(long); got != 30 {
			t.Fatalf("Count = %d, want 30", got)
		}
	}
	if n := base.calls.Load(); n != 1 {
		t.Fatalf("a long text was counted %d times, want once", n)
	}
	// A different text of the same length is its own entry.
	other := strings.Repeat("tool descriptionXwords ", 10)
	if got := m.Count(other); got != 20 {
		t.Fatalf("Count(other) = %d, want 20", got)
	}
	// Short texts (tool names, framing) are remembered too: each count
	// of the real tokenizer costs microseconds of set-up.
	short := "a few words"
	m.Count(short)
	m.Count(short)
	if n := base.calls.Load(); n != 3 {
		t.Fatalf("short texts: %d calls in all, want 3 (a short text counted once)", n)
	}
	m.Count("")
	if n := base.calls.Load(); n != 4 {
		t.Fatalf("empty text: %d calls in all, want 4 (the empty text is counted directly)", n)
	}
	for i := range memoEntries + 10 {
		m.Count(fmt.Sprintf("%s %d", long, i))
	}
	if n := m.(*memoTokenizer).counts.len(); n > memoEntries {
		t.Fatalf("memo holds %d entries, bound %d", n, memoEntries)
	}
}

// The per-scope memory of prefix hashes and history cuts stays bounded
// however many timelines an instance serves.
func TestScopeMemoryIsBounded(t *testing.T) {
	m, err := New(Deps{Store: unreadStore{}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	turns := []turn{{msgs: []services.Message{{ID: 1}}, tokens: 10}, {msgs: []services.Message{{ID: 2}}, tokens: 10}}
	for i := range maxScopesRemembered + 50 {
		m.stepCut(fmt.Sprintf("tl-%d/main", i), turns, 1, 20, 10, true)
	}
	if n := len(m.lastCut); n > maxScopesRemembered {
		t.Fatalf("%d history cuts remembered, bound %d", n, maxScopesRemembered)
	}
}

// unreadStore is a Store the test never reads.
type unreadStore struct{ services.ChatStore }
