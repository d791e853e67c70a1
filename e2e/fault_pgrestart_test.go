package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/localpg"
)

// TestFaultPostgresRestartUnderTraffic runs `switchboard serve` on a
// private PostgreSQL cluster, stops the cluster while a client posts and a
// websocket follows the timeline, and starts it again:
//   - during the outage every post fails clearly: 503 with Retry-After
//     (never a 500, never a 201 that is then lost), and /readyz says 503;
//   - afterwards the service recovers by itself (no restart of serve);
//   - every message accepted (201/200) is in the timeline exactly once, and
//     the websocket client, reconnecting with ?after= when it is closed,
//     has seen every message once, in order, with no gap.
func TestFaultPostgresRestartUnderTraffic(t *testing.T) {
	if _, err := localpg.FindBinDir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "switchboard-fault-pg-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755) // the cluster may run as the postgres user
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	cluster, err := localpg.Start(ctx, data, 0)
	if err != nil {
		t.Fatal(err)
	}
	port := cluster.Port
	t.Cleanup(func() { _ = cluster.Stop() })
	dbURL, err := localpg.EnsureDatabase(ctx, cluster.URL("postgres"), "switchboard")
	if err != nil {
		t.Fatal(err)
	}

	bin := buildBinary(t)
	const token = "fault-pg-token-0123456789"
	p := startProc(t, bin, dbURL, "WEB_AUTH_TOKEN="+token, "RATE_LIMIT_PER_MINUTE=0")
	c := newOwnerClient(p.URL, token)

	// The follower: reads the websocket, reconnecting after the last id it
	// has whenever the connection ends.
	wctx, stopWS := context.WithCancel(ctx)
	var wsMu sync.Mutex
	var wsIDs []int64
	reconnects := 0
	wsDone := make(chan struct{})
	go func() {
		defer close(wsDone)
		last := int64(0)
		for wctx.Err() == nil {
			conn, err := dialOwnerWS(wctx, p.URL, token, last)
			if err != nil {
				pause(wctx, 200*time.Millisecond) // reconnect backoff
				continue
			}
			for {
				_, b, err := conn.Read(wctx)
				if err != nil {
					break
				}
				var f wsFrame
				if json.Unmarshal(b, &f) == nil && f.Type == "message" {
					wsMu.Lock()
					wsIDs = append(wsIDs, f.Message.ID)
					wsMu.Unlock()
					last = f.Message.ID
				}
			}
			conn.CloseNow()
			wsMu.Lock()
			reconnects++
			wsMu.Unlock()
			pause(wctx, 200*time.Millisecond) // reconnect backoff
		}
	}()

	// The poster: one message every 40 ms; a failed post is retried with
	// the same client_key until it is accepted, like a careful client.
	type outcome struct {
		at      time.Time
		status  int
		retryAf string
		err     error
	}
	var mu sync.Mutex
	var outcomes []outcome
	accepted := map[int64]string{}
	postOne := func(i int) {
		key := fmt.Sprintf("pg-%d", i)
		for {
			r := c.post(fmt.Sprintf("message %d", i), key)
			mu.Lock()
			outcomes = append(outcomes, outcome{time.Now(), r.Status, r.RetryAfter, r.Err})
			if r.Status == 201 || r.Status == 200 {
				accepted[r.Message.ID] = key
			}
			mu.Unlock()
			if r.Status == 201 || r.Status == 200 {
				return
			}
			pause(ctx, 100*time.Millisecond) // retry backoff
		}
	}
	acceptedSince := func(from time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range outcomes {
			if o.at.After(from) && (o.status == 201 || o.status == 200) {
				n++
			}
		}
		return n
	}
	stopPosting := make(chan struct{})
	posterDone := make(chan struct{})
	go func() {
		defer close(posterDone)
		for i := 0; ; i++ {
			select {
			case <-stopPosting:
				return
			default:
			}
			postOne(i)
			pause(ctx, 40*time.Millisecond) // the poster's pace
		}
	}()

	// Traffic flows before the outage.
	if !waitUntil(30*time.Second, func() bool { return acceptedSince(time.Time{}) >= 10 }) {
		t.Fatalf("posts are not accepted before the outage:\n%s", tail(p.Stderr.String(), 2000))
	}
	down := time.Now()
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	// During the outage: readiness says so, and posts are refused (the
	// outage lasts until both are seen).
	var ready int
	waitUntil(30*time.Second, func() bool {
		mu.Lock()
		refused := false
		for _, o := range outcomes {
			refused = refused || (o.at.After(down) && o.status == http.StatusServiceUnavailable)
		}
		mu.Unlock()
		ready = getStatus(t, p.URL+"/readyz")
		return refused && ready == http.StatusServiceUnavailable
	})
	if ready != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the outage: %d; want 503", ready)
	}
	if cluster, err = localpg.Start(ctx, data, port); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	// Recovery: the poster gets through again without anyone restarting serve.
	var recovered time.Time
	if !pollEvery(20*time.Second, 50*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outcomes {
			if o.at.After(up) && (o.status == 201 || o.status == 200) {
				recovered = o.at
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no post accepted within 20s of PostgreSQL coming back:\n%s", tail(p.Stderr.String(), 2000))
	}
	// Traffic flows again after the recovery.
	if !waitUntil(30*time.Second, func() bool { return acceptedSince(recovered) >= 10 }) {
		t.Fatalf("posts stopped being accepted after the recovery:\n%s", tail(p.Stderr.String(), 2000))
	}
	close(stopPosting)
	<-posterDone
	if got := getStatus(t, p.URL+"/readyz"); got != 200 {
		t.Errorf("/readyz after recovery: %d", got)
	}

	// What clients saw while the database was down.
	counts := map[string]int{}
	for _, o := range outcomes {
		if o.at.Before(down) || o.at.After(up) {
			continue
		}
		k := fmt.Sprint(o.status)
		switch {
		case o.err != nil:
			k = "connection error"
		case o.status == 503 && o.retryAf == "":
			k = "503 without Retry-After"
		case o.status == 503:
			k = "503 with Retry-After " + o.retryAf
		}
		counts[k]++
	}
	t.Logf("outage %s; first post accepted %s after restart; during the outage: %v; websocket reconnects: %d",
		up.Sub(down).Round(100*time.Millisecond), recovered.Sub(up).Round(100*time.Millisecond), counts, reconnects)
	for k, n := range counts {
		if k != "503 with Retry-After 5" && k != "201" && k != "200" {
			t.Errorf("during the outage %d posts got %s; want 503 with Retry-After", n, k)
		}
	}
	if counts["503 with Retry-After 5"] == 0 {
		t.Errorf("no 503 seen during the outage: %v", counts)
	}

	// Nothing accepted is lost or doubled; the websocket saw it all once.
	timelineIDs := map[int64]int{}
	var all []int64
	for _, m := range c.timeline(t) {
		timelineIDs[m.ID]++
		all = append(all, m.ID)
	}
	for id, key := range accepted {
		if timelineIDs[id] != 1 {
			t.Errorf("accepted message %d (%s) is in the timeline %d times", id, key, timelineIDs[id])
		}
	}
	keys := map[string]bool{}
	for _, k := range accepted {
		keys[k] = true
	}
	if len(keys) != len(accepted) {
		t.Errorf("%d accepted ids for %d client keys: a retried post was stored twice", len(accepted), len(keys))
	}
	waitFor(t, "the websocket to catch up", func() bool {
		wsMu.Lock()
		defer wsMu.Unlock()
		return len(wsIDs) > 0 && wsIDs[len(wsIDs)-1] >= all[len(all)-1]
	})
	stopWS()
	<-wsDone
	// Answers may have arrived after the timeline was read.
	for len(wsIDs) > 0 && wsIDs[len(wsIDs)-1] > all[len(all)-1] {
		wsIDs = wsIDs[:len(wsIDs)-1]
	}
	if !sort.SliceIsSorted(wsIDs, func(i, j int) bool { return wsIDs[i] < wsIDs[j] }) {
		t.Errorf("websocket ids out of order")
	}
	checkEveryQuestionAnsweredOnce(t, c, accepted, 20*time.Second)
	if fmt.Sprint(wsIDs) != fmt.Sprint(all) {
		t.Errorf("websocket saw %d messages, the timeline has %d: gaps or duplicates\nws:       %v\ntimeline: %v", len(wsIDs), len(all), wsIDs, all)
	}
}

// checkEveryQuestionAnsweredOnce waits for each accepted message to have a
// reply (answer or notice) and fails on any with two.
func checkEveryQuestionAnsweredOnce(t *testing.T, c *ownerClient, ids map[int64]string, within time.Duration) {
	t.Helper()
	var missing []int64
	if !pollEvery(within, 200*time.Millisecond, func() bool {
		msgs := c.timeline(t)
		missing = nil
		for id := range ids {
			switch n := len(repliesTo(msgs, id)); {
			case n > 1:
				t.Fatalf("message %d has %d replies: %+v", id, n, repliesTo(msgs, id))
			case n == 0:
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	}) {
		t.Fatalf("%d of %d accepted messages have no reply after %s: %v", len(missing), len(ids), within, missing)
	}
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
