package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type grantAll struct{}

type heldLease struct{ lost chan struct{} }

func (grantAll) TryLease(context.Context, string) (Lease, error) {
	return heldLease{lost: make(chan struct{})}, nil
}
func (l heldLease) Lost() <-chan struct{} { return l.lost }
func (heldLease) Release()                {}

// TestPollingConfirmsOnlyStoredUpdates: the offset sent to getUpdates moves
// past an update only once it is stored; a redelivered update is skipped;
// a restart resumes from the stored offset.
func TestPollingConfirmsOnlyStoredUpdates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var offsets []int64
	batches := [][]int{{1, 2}, {2, 3}} // update 2 delivered twice
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/getUpdates") {
			_, _ = io.WriteString(w, `{"ok":true,"result":true}`)
			return
		}
		var req struct{ Offset int64 }
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		offsets = append(offsets, req.Offset)
		var ids []int
		if len(batches) > 0 {
			ids, batches = batches[0], batches[1:]
		}
		mu.Unlock()
		var ups []string
		for _, id := range ids {
			ups = append(ups, fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":1,"text":"m%d","from":{"id":1,"is_bot":false,"first_name":"O"},"chat":{"id":1,"type":"private"}}}`, id, id, id))
		}
		_, _ = fmt.Fprintf(w, `{"ok":true,"result":[%s]}`, strings.Join(ups, ","))
	}))
	t.Cleanup(srv.Close)
	b, f, _ := setup(t, func(o *options) {
		o.APIURL, o.Leases, o.PollIdle = srv.URL, grantAll{}, 20*time.Millisecond
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { b.RunPolling(ctx); close(done) }()
	asked := func() int { mu.Lock(); defer mu.Unlock(); return len(offsets) }
	// The assertions below say what is missing if this gives up.
	poll(15*time.Second, func() bool { return asked() >= 3 })
	cancel()
	<-done
	f.mu.Lock()
	posts := len(f.posts)
	f.mu.Unlock()
	if posts != 3 || f.offset != 3 {
		t.Fatalf("posts %d, offset %d", posts, f.offset)
	}
	mu.Lock()
	defer mu.Unlock()
	if offsets[0] != 1 || offsets[1] != 3 || offsets[2] != 4 {
		t.Fatalf("offsets asked: %v", offsets)
	}
	if b.IsLeader() {
		t.Fatal("still leader after stopping")
	}
	// A restart resumes after the stored offset.
	seen := len(offsets)
	mu.Unlock()
	ctx, cancel = context.WithCancel(t.Context())
	done = make(chan struct{})
	go func() { b.RunPolling(ctx); close(done) }()
	if !poll(15*time.Second, func() bool { return asked() > seen }) {
		t.Fatal("the restarted poller never asked for updates")
	}
	cancel()
	<-done
	mu.Lock()
	if offsets[seen] != 4 {
		t.Fatalf("restart asked for offset %d", offsets[seen])
	}
}
