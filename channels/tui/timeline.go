package tui

import (
	"sort"

	"github.com/switchboard/switchboard/web/wire"
)

// timeline is the messages the TUI holds: in id order, each id once, however
// they arrive (initial page, older pages, live frames, replayed backlog after
// a reconnect, the answer to our own POST).
type timeline struct {
	msgs []wire.Message
	seen map[int64]struct{}
}

// add inserts m in id order; false when its id is already there.
func (t *timeline) add(m wire.Message) bool {
	if t.seen == nil {
		t.seen = make(map[int64]struct{})
	}
	if _, ok := t.seen[m.ID]; ok {
		return false
	}
	t.seen[m.ID] = struct{}{}
	n := len(t.msgs)
	if n == 0 || t.msgs[n-1].ID < m.ID {
		t.msgs = append(t.msgs, m) // the common case: a newer message
		return true
	}
	i := sort.Search(n, func(i int) bool { return t.msgs[i].ID > m.ID })
	t.msgs = append(t.msgs, wire.Message{})
	copy(t.msgs[i+1:], t.msgs[i:])
	t.msgs[i] = m
	return true
}

// replace puts m in place of the message with its id; false when absent.
func (t *timeline) replace(m wire.Message) bool {
	i := sort.Search(len(t.msgs), func(i int) bool { return t.msgs[i].ID >= m.ID })
	if i == len(t.msgs) || t.msgs[i].ID != m.ID {
		return false
	}
	t.msgs[i] = m
	return true
}

// approvalRank orders an approval's states: a request never goes back to
// an older one (a notice presented before a newer state was known).
var approvalRank = map[string]int{"pending": 0, "approved": 1, "denied": 1, "timed_out": 1, "cancelled": 1,
	"executing": 2, "executed": 3, "interrupted": 3}

// decided gives the request held here for approval a (the notice that
// asked) a's newer state, and returns the ids of the messages it changed.
func (t *timeline) decided(a wire.Approval) []int64 {
	var changed []int64
	for i := range t.msgs {
		old := t.msgs[i].Approval
		if old == nil || old.ID != a.ID || *old == a || approvalRank[a.State] < approvalRank[old.State] {
			continue
		}
		cp := a
		t.msgs[i].Approval = &cp
		changed = append(changed, t.msgs[i].ID)
	}
	return changed
}

// waiting reports whether a request of run runID still waits for a
// decision (an approval held here in state pending).
func (t *timeline) waiting(runID int64) bool {
	for _, m := range t.msgs {
		if m.Approval != nil && m.Approval.State == "pending" && meta(m).RunID == runID {
			return true
		}
	}
	return false
}

// oldest is the smallest id held, 0 when empty.
func (t *timeline) oldest() int64 {
	if len(t.msgs) == 0 {
		return 0
	}
	return t.msgs[0].ID
}

// newest is the largest id held, 0 when empty.
func (t *timeline) newest() int64 {
	if len(t.msgs) == 0 {
		return 0
	}
	return t.msgs[len(t.msgs)-1].ID
}
