package prompt

import (
	"context"
	"sync"

	"github.com/switchboard/switchboard/services"
)

// Every turn's prompt reads the conversation's history back from its end
// until the history budget is full: with a large window, hundreds of rows
// per turn, nearly all of them the rows the previous turn read. historyCache
// keeps, per (timeline, read scope), the rows read, and reads only the
// rows stored since: chat rows are never changed or deleted, and rows of
// one timeline commit in id order (InsertMessage serialises them under the
// timeline's transaction lock), so "rows after the last id read" is every
// new row. The last row read is read again with the new ones; when it is
// not there as it was (a database restored or failed over to a standby
// that lost recent rows), the entry starts over.

// Bounds: entries kept (the least recently used dropped), and the bytes
// of one entry (the oldest rows dropped): a full 128k-token window of
// history is about half of it. At most 8 MiB in all. Within that, an
// entry keeps only the rows its recent builds read: every
// historyNeedBuilds builds, rows older than the oldest row any of them
// was given are dropped (a build stops paging once the working set is
// full, so a long conversation's entry holds about the working set and
// a page more, not its whole history). A build that reaches further back
// reads the dropped rows from the store again, and keeps them.
const (
	historyEntries = 8
	historyBytes   = 1 << 20
	// historyPage is the page size of reads.
	historyPage = 200
	// historyNeedBuilds is how many builds' reads decide what an entry
	// keeps.
	historyNeedBuilds = 8
)

type historyKey struct {
	timeline, scope string
	byTimeline      bool
}

type historyEntry struct {
	mu sync.Mutex
	// valid: every row of the key with id > low is in rows (ascending).
	valid bool
	low   int64
	rows  []services.Message
	bytes int
	used  uint64
	// oldest is the id of the oldest row served over the last builds
	// builds (0: none yet).
	oldest int64
	builds int
}

type historyCache struct {
	mu      sync.Mutex
	entries map[historyKey]*historyEntry
	tick    uint64
}

func (c *historyCache) entry(k historyKey) *historyEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[historyKey]*historyEntry{}
	}
	c.tick++
	e := c.entries[k]
	if e == nil {
		if len(c.entries) >= historyEntries {
			var oldest historyKey
			first := true
			for k, e := range c.entries {
				if first || e.used < c.entries[oldest].used {
					oldest, first = k, false
				}
			}
			delete(c.entries, oldest)
		}
		e = &historyEntry{}
		c.entries[k] = e
	}
	e.used = c.tick
	return e
}

// page is store.ListContext(q) for a q that pages history backwards (a
// BeforeID and a Limit): the newest q.Limit rows with q.AfterID < id <
// q.BeforeID, ascending. The first page of a build (BeforeID past every id)
// brings the entry up to date; later pages are served from it, reading
// only what is older than the entry holds.
func (c *historyCache) page(ctx context.Context, store services.ChatStore, q services.ContextQuery) ([]services.Message, error) {
	if q.Limit <= 0 || q.BeforeID <= 0 {
		return store.ListContext(ctx, q)
	}
	e := c.entry(historyKey{q.TimelineScope, q.ContextScope, q.ByTimelineOnly})
	e.mu.Lock()
	defer e.mu.Unlock()
	out, err := e.page(ctx, store, q)
	if len(out) > 0 && (e.oldest == 0 || out[0].ID < e.oldest) {
		e.oldest = out[0].ID
	}
	return out, err
}

func (e *historyEntry) page(ctx context.Context, store services.ChatStore, q services.ContextQuery) ([]services.Message, error) {
	const newest = 1<<63 - 1
	if q.BeforeID == newest {
		// A build begins.
		e.builds++
		if e.builds > historyNeedBuilds {
			e.dropBefore(e.oldest)
			e.oldest, e.builds = 0, 1
		}
	}
	if e.valid && q.BeforeID == newest {
		if err := e.refresh(ctx, store, q); err != nil {
			e.valid, e.rows = false, nil
			return nil, err
		}
	}
	if !e.valid {
		page, err := store.ListContext(ctx, q)
		if err != nil || q.BeforeID != newest {
			return page, err
		}
		e.rows = append([]services.Message(nil), page...)
		e.low = lowOf(page, q)
		e.valid = true
		e.trim()
		return page, nil
	}
	// The entry's rows in (AfterID, BeforeID), the newest Limit of them.
	hi := len(e.rows)
	for hi > 0 && e.rows[hi-1].ID >= q.BeforeID {
		hi--
	}
	lo := hi
	for lo > 0 && hi-lo < q.Limit && e.rows[lo-1].ID > q.AfterID {
		lo--
	}
	got := e.rows[lo:hi]
	if len(got) == q.Limit || e.low <= q.AfterID {
		return append([]services.Message(nil), got...), nil
	}
	// Rows older than the entry holds: read them and keep them (the
	// entry's rows are the newest, so they begin where the entry did).
	oq := q
	oq.BeforeID, oq.Limit = min(q.BeforeID, e.low+1), q.Limit-len(got)
	older, err := store.ListContext(ctx, oq)
	if err != nil {
		return nil, err
	}
	out := append(append([]services.Message(nil), older...), got...)
	if lo == 0 && oq.BeforeID == e.low+1 {
		e.rows = append(append([]services.Message(nil), older...), e.rows...)
		e.low = lowOf(older, oq)
		e.trim()
	}
	return out, nil
}

// lowOf is the id after which a backward page read with q holds every
// row up to its end: q.AfterID when it was not full.
func lowOf(page []services.Message, q services.ContextQuery) int64 {
	if len(page) == q.Limit && len(page) > 0 {
		return page[0].ID - 1
	}
	return q.AfterID
}

// refresh appends the rows stored after the entry's last row; when that
// row is not there as read, the entry is marked invalid.
func (e *historyEntry) refresh(ctx context.Context, store services.ChatStore, q services.ContextQuery) error {
	after := e.low
	var last *services.Message
	if n := len(e.rows); n > 0 {
		last = &e.rows[n-1]
		after = last.ID - 1 // the last row is read again, as a check
	}
	checked := last == nil
	for {
		page, err := store.ListContext(ctx, services.ContextQuery{TimelineScope: q.TimelineScope, ContextScope: q.ContextScope,
			ByTimelineOnly: q.ByTimelineOnly, AfterID: after, Limit: historyPage})
		if err != nil {
			return err
		}
		if !checked {
			if len(page) == 0 || page[0].ID != last.ID || !page[0].CreatedAt.Equal(last.CreatedAt) || page[0].Content != last.Content {
				e.valid, e.rows = false, nil
				return nil
			}
			checked = true
			e.rows = append(e.rows, page[1:]...)
		} else {
			e.rows = append(e.rows, page...)
		}
		if len(page) < historyPage {
			break
		}
		after = page[len(page)-1].ID
	}
	e.trim()
	return nil
}

// trim drops the oldest rows past historyBytes.
func (e *historyEntry) trim() {
	e.bytes = 0
	n := len(e.rows)
	for n > 0 && e.bytes+rowBytes(e.rows[n-1]) <= historyBytes {
		n--
		e.bytes += rowBytes(e.rows[n])
	}
	if n > 0 {
		e.low = e.rows[n-1].ID
		e.rows = append([]services.Message(nil), e.rows[n:]...)
	}
}

// dropBefore drops the rows older than id (none when id is 0).
func (e *historyEntry) dropBefore(id int64) {
	k := 0
	for k < len(e.rows) && e.rows[k].ID < id {
		k++
	}
	if k == 0 {
		return
	}
	e.low = e.rows[k-1].ID
	e.rows = append([]services.Message(nil), e.rows[k:]...)
	e.bytes = 0
	for _, m := range e.rows {
		e.bytes += rowBytes(m)
	}
}

// rowBytes is about what a row takes in memory.
func rowBytes(m services.Message) int { return len(m.Content) + len(m.Metadata) + 200 }
