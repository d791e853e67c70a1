package e2e

// Helpers for the tests of several instances (scale_*_test.go): websocket
// followers that reconnect with ?after= to whichever instance answers, and
// a poster that retries a post with its client_key until one accepts it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// instances is the set of live serve URLs, as a load balancer knows it.
type instances struct {
	mu   sync.Mutex
	urls []string
}

func (in *instances) set(i int, url string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.urls[i] = url
}

// pick returns the URL for attempt n of a client whose home is home.
func (in *instances) pick(home, n int) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.urls[(home+n)%len(in.urls)]
}

// follower reads the owner's timeline over a websocket, reconnecting after
// the last id it has whenever its connection ends (to its home instance
// first, then the next one: what a balancer does when an instance dies).
type follower struct {
	mu         sync.Mutex
	ids        []int64
	start      int64 // the id it first connected after (from "ready")
	ready      bool
	reconnects int
	dialErrors int
	done       chan struct{}
}

func startFollower(ctx context.Context, in *instances, home int, token string) *follower {
	f := &follower{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		last := int64(-1) // -1: the first connection, with no ?after=
		for attempt := 0; ctx.Err() == nil; attempt++ {
			base := in.pick(home, attempt)
			after := last
			if after < 0 {
				after = 0
			}
			dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			conn, err := dialOwnerWSFirst(dctx, base, token, after, last < 0)
			cancel()
			if err != nil {
				f.mu.Lock()
				f.dialErrors++
				f.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			attempt = -1 // connected: the next attempt starts at home again
			for {
				_, b, err := conn.Read(ctx)
				if err != nil {
					break
				}
				var fr wsFrame
				if json.Unmarshal(b, &fr) != nil {
					continue
				}
				f.mu.Lock()
				switch {
				case fr.Type == "ready" && !f.ready:
					f.ready, f.start = true, fr.LastID
					if last < 0 {
						last = fr.LastID
					}
				case fr.Type == "message" && fr.Message != nil:
					f.ids = append(f.ids, fr.Message.ID)
					last = fr.Message.ID
				}
				f.mu.Unlock()
			}
			conn.CloseNow()
			if ctx.Err() == nil {
				f.mu.Lock()
				f.reconnects++
				f.mu.Unlock()
				pause(ctx, 100*time.Millisecond) // reconnect backoff
			}
		}
	}()
	return f
}

func (f *follower) isReady() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *follower) snapshot() (ids []int64, start int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ids), f.start
}

func (f *follower) lastID() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ids) == 0 {
		return f.start
	}
	return f.ids[len(f.ids)-1]
}

// dialOwnerWSFirst dials the websocket; a first connection asks for no
// backlog (it starts at the newest message), a reconnection for what
// followed after.
func dialOwnerWSFirst(ctx context.Context, base, token string, after int64, first bool) (*websocket.Conn, error) {
	if !first {
		return dialOwnerWS(ctx, base, token, after)
	}
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	return conn, nil
}

// diffFollower compares a follower's ids with the timeline's visible ids
// after its start: "" when equal (answers that arrived after the timeline
// was read are ignored), else what differs.
func diffFollower(f *follower, timeline []int64) string {
	ids, start := f.snapshot()
	i, _ := slices.BinarySearch(timeline, start+1)
	want := timeline[i:]
	for len(ids) > 0 && len(want) > 0 && ids[len(ids)-1] > want[len(want)-1] {
		ids = ids[:len(ids)-1]
	}
	if slices.Equal(ids, want) {
		return ""
	}
	seen := map[int64]int{}
	for _, id := range ids {
		seen[id]++
	}
	var missing, twice []int64
	for _, id := range want {
		if seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	for id, n := range seen {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	return fmt.Sprintf("received %d, the timeline has %d after %d; missing %v; twice %v", len(ids), len(want), start, head(missing), head(twice))
}

func head(ids []int64) []int64 {
	if len(ids) > 10 {
		return ids[:10]
	}
	return ids
}

// postOutcome is one attempt of a post.
type postOutcome struct {
	at      time.Time
	status  int
	retryAf string
	err     error
}

// poster posts questions, each retried with its client_key (on the next
// instance) until one is accepted, like a careful client.
type poster struct {
	mu       sync.Mutex
	outcomes []postOutcome
	accepted map[int64]string // message id → client key
	keys     map[string]int64 // client key → message id of its (last) acceptance
	dupKeys  []string         // keys accepted under two different ids
}

func newPoster() *poster {
	return &poster{accepted: map[int64]string{}, keys: map[string]int64{}}
}

// post sends one question until accepted (or ctx ends).
func (p *poster) post(ctx context.Context, in *instances, home int, token, content, key string) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		c := newOwnerClient(in.pick(home, attempt), token)
		r := c.post(content, key)
		p.mu.Lock()
		p.outcomes = append(p.outcomes, postOutcome{time.Now(), r.Status, r.RetryAfter, r.Err})
		ok := r.Status == 201 || r.Status == 200
		if ok {
			if prev, seen := p.keys[key]; seen && prev != r.Message.ID {
				p.dupKeys = append(p.dupKeys, key)
			}
			p.keys[key] = r.Message.ID
			p.accepted[r.Message.ID] = key
		}
		p.mu.Unlock()
		if ok {
			return
		}
		pause(ctx, 100*time.Millisecond) // retry backoff
	}
}

// firstAcceptedAfter is when the first post after t was accepted (zero: none).
func (p *poster) firstAcceptedAfter(t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.outcomes {
		if o.at.After(t) && (o.status == 201 || o.status == 200) {
			return o.at
		}
	}
	return time.Time{}
}

// acceptedSince counts the posts accepted after from.
func (p *poster) acceptedSince(from time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, o := range p.outcomes {
		if o.at.After(from) && (o.status == 201 || o.status == 200) {
			n++
		}
	}
	return n
}

// failures counts the failed attempts between from and to by kind.
func (p *poster) failures(from, to time.Time) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, o := range p.outcomes {
		if o.at.Before(from) || o.at.After(to) || o.status == 201 || o.status == 200 {
			continue
		}
		switch {
		case o.err != nil:
			out["connection error"]++
		case o.status == 503 && o.retryAf != "":
			out["503 with Retry-After"]++
		default:
			out[fmt.Sprint(o.status)]++
		}
	}
	return out
}

func (p *poster) acceptedIDs() map[int64]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]string, len(p.accepted))
	for id, k := range p.accepted {
		out[id] = k
	}
	return out
}

// visibleIDs returns the ids of a timeline's messages.
func visibleIDs(msgs []apiMessage) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// waitUntil polls cond every 100 ms until it holds or within passes.
func waitUntil(within time.Duration, cond func() bool) bool {
	return pollEvery(within, 100*time.Millisecond, cond)
}

// missingTexts returns the texts of sent that no timeline message has.
func missingTexts(t *testing.T, c *ownerClient, sent []string) []string {
	t.Helper()
	have := map[string]bool{}
	for _, m := range c.timeline(t) {
		have[m.Content] = true
	}
	var out []string
	for _, s := range sent {
		if !have[s] {
			out = append(out, s)
		}
	}
	return out
}

// clusterDir is a temporary directory for PostgreSQL clusters, removed at
// the test's end; searchable by the postgres user the clusters may run as.
func clusterDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "switchboard-scale-pg-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
