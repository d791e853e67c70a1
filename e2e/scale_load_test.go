package e2e

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/repository/localpg"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

var (
	scaleClients  = flag.Int("scale-clients", 100, "TestThreeInstancesUnderLoadWithKill9: websocket clients over the three instances (1000 for the full run)")
	scaleDuration = flag.Duration("scale-duration", 12*time.Second, "TestThreeInstancesUnderLoadWithKill9: how long questions are posted")
)

// TestThreeInstancesUnderLoadWithKill9 runs three `switchboard serve`
// processes on one database with websocket clients spread over them,
// questions posted on all three (answered by the fake model after 50 ms)
// and the owner writing on Telegram (the strict Bot API server); halfway
// the instance polling Telegram is killed with SIGKILL and started again
// 2 s later. Its clients reconnect to the next instance with ?after= (as
// behind a balancer), its posts are retried there with their keys.
// Checked afterwards:
//   - every client's messages are identical to the timeline after the
//     point it joined (nothing missing, nothing twice, in order);
//   - every question (web and Telegram) has exactly one reply: its answer,
//     or the notice that a run cut off by the kill was interrupted;
//   - no accepted post and no Telegram message is stored twice or lost;
//   - Telegram polling moves to a live instance within seconds.
//
// The suite runs it with 100 clients; the full run:
//
//	go test -count=1 -run TestThreeInstancesUnderLoadWithKill9 -v ./cmd/switchboard/ -args -scale-clients=1000
func TestThreeInstancesUnderLoadWithKill9(t *testing.T) {
	t.Parallel()
	if err := raiseOpenFiles(uint64(3**scaleClients + 1024)); err != nil {
		t.Skip(err)
	}
	if _, err := localpg.FindBinDir(); err != nil {
		t.Skip(err)
	}
	bin := buildBinary(t)
	db := privateCluster(t, 300)
	strict := tgtest.StartStrict(t, tgToken)
	model := llmtest.NewServer(t)
	model.SetLatency(50 * time.Millisecond)
	const token = "scale-owner-token-0123456789"
	env := append(telegramEnv(strict, model, token), "RATE_LIMIT_PER_MINUTE=0",
		fmt.Sprint("HTTP_MAX_CONNS_PER_IP=", 2**scaleClients+256), fmt.Sprint("HTTP_MAX_CONNS=", 2**scaleClients+256))

	procs := make([]*serveProc, 3)
	for i := range procs {
		procs[i] = startProc(t, bin, db, env...)
	}
	in := &instances{urls: []string{procs[0].URL, procs[1].URL, procs[2].URL}}

	fctx, stopFollowers := context.WithCancel(context.Background())
	defer stopFollowers()
	followers := make([]*follower, *scaleClients)
	connectStart := time.Now()
	for i := range followers {
		followers[i] = startFollower(fctx, in, i%3, token)
	}
	if !waitUntil(90*time.Second, func() bool {
		for _, f := range followers {
			if !f.isReady() {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("not every websocket client connected within 90s")
	}
	connected := time.Since(connectStart)

	// Traffic: a question every 400 ms, on the instances in turn; the
	// owner on Telegram every 1.5 s. One timeline answers one question at
	// a time (~0.2 s a turn here), so more would only queue.
	tctx, stopTraffic := context.WithCancel(context.Background())
	defer stopTraffic()
	ps := newPoster()
	var wg sync.WaitGroup
	owner := tgtest.User{ID: ownerTGID, FirstName: "Owner"}
	var tgMu sync.Mutex
	var tgSent []string
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(400 * time.Millisecond)
		defer tick.Stop()
		var pwg sync.WaitGroup
		for i := 0; ; i++ {
			select {
			case <-tctx.Done():
				pwg.Wait()
				return
			case <-tick.C:
			}
			pwg.Add(1)
			go func() {
				defer pwg.Done()
				ps.post(context.Background(), in, i%3, token, fmt.Sprintf("load question %d", i), fmt.Sprintf("load-%d", i))
			}()
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; tctx.Err() == nil; i++ {
			text := fmt.Sprintf("telegram load %d", i)
			strict.Send(owner, text)
			tgMu.Lock()
			tgSent = append(tgSent, text)
			tgMu.Unlock()
			pause(tctx, 1500*time.Millisecond) // the owner's pace
		}
	}()

	// Halfway: kill -9 the instance that polls Telegram, start it again 2 s later.
	time.Sleep(*scaleDuration / 2) // why kept: the scenario's length (-scale-duration) under load, not a wait for an event
	leader := pollingLeader(procs)
	if leader < 0 {
		t.Fatal("no instance says it polls Telegram")
	}
	before := make([]int, 3)
	for i, p := range procs {
		before[i] = strings.Count(p.Stderr.String(), "this instance polls for updates")
	}
	killedAt := time.Now()
	procs[leader].kill9()
	var takeover time.Duration
	newLeader := -1
	if !waitUntil(20*time.Second, func() bool {
		for i, p := range procs {
			if i != leader && strings.Count(p.Stderr.String(), "this instance polls for updates") > before[i] {
				takeover, newLeader = time.Since(killedAt), i
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no live instance took over Telegram polling within 20s of the kill")
	}
	time.Sleep(2*time.Second - time.Since(killedAt)) // why kept: the scenario restarts the killed instance 2 s after the kill
	old := procs[leader]
	procs[leader] = startProc(t, bin, db, env...)
	in.set(leader, procs[leader].URL)
	restartedAt := time.Now()
	time.Sleep(*scaleDuration/2 - time.Since(killedAt)) // why kept: the rest of the scenario's length under load
	stopTraffic()
	wg.Wait()

	// Every question answered once; every post and Telegram message once.
	c := newOwnerClient(procs[(leader+1)%3].URL, token)
	tgMu.Lock()
	sentTG := append([]string(nil), tgSent...)
	tgMu.Unlock()
	var notStored []string
	if !waitUntil(30*time.Second, func() bool { notStored = missingTexts(t, c, sentTG); return len(notStored) == 0 }) {
		t.Errorf("Telegram messages never stored: %v", notStored)
	}
	accepted := ps.acceptedIDs()
	msgs := c.timeline(t)
	byID := map[int64]bool{}
	texts := map[string]int{}
	questions := map[int64]string{}
	for _, m := range msgs {
		byID[m.ID] = true
		if m.Role == "user" {
			texts[m.Content]++
			questions[m.ID] = m.Content
		}
	}
	for id, key := range accepted {
		if !byID[id] {
			t.Errorf("accepted post %s (message %d) is not in the timeline", key, id)
		}
	}
	for txt, n := range texts {
		if n > 1 {
			t.Errorf("%q stored %d times", txt, n)
		}
	}
	if len(ps.dupKeys) > 0 {
		t.Errorf("client keys accepted under two ids: %v", ps.dupKeys)
	}
	checkEveryQuestionAnsweredOnce(t, c, questions, 90*time.Second)

	// Every client identical to the timeline.
	final := visibleIDs(c.timeline(t))
	last := final[len(final)-1]
	waitUntil(30*time.Second, func() bool {
		for _, f := range followers {
			if f.lastID() < last {
				return false
			}
		}
		return true
	})
	stopFollowers()
	bad, reconnects := 0, 0
	for i, f := range followers {
		<-f.done
		reconnects += f.reconnects
		if d := diffFollower(f, final); d != "" {
			bad++
			if bad <= 5 {
				t.Errorf("client %d (home instance %d): %s", i, i%3, d)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d clients differ from the timeline", bad, len(followers))
	}
	interrupted := 0
	for _, m := range msgs {
		if m.Source == "system" && strings.Contains(m.Content, "interrupted") {
			interrupted++
		}
	}
	fails := ps.failures(killedAt.Add(-time.Second), restartedAt.Add(5*time.Second))
	t.Logf("%d clients connected in %s over 3 instances; %d web questions accepted, %d Telegram messages sent, %d messages in the timeline; "+
		"instance %d (polling Telegram) killed: instance %d polled %s later; restarted 2s after the kill; failed post attempts around the kill: %v; "+
		"%d client reconnects; %d runs cut off by the kill (interrupted notices); %d of %d clients identical to the timeline",
		len(followers), connected.Round(time.Millisecond), len(accepted), len(sentTG), len(final),
		leader, newLeader, takeover.Round(time.Millisecond), fails, reconnects, interrupted, len(followers)-bad, len(followers))
	if takeover > 10*time.Second {
		t.Errorf("Telegram polling moved %s after the kill; want within seconds", takeover)
	}
	_ = old
}

// privateCluster starts a PostgreSQL cluster of the test's own (the shared
// test server's connection limit is for everyone's tests) with room for
// maxConns connections, and returns its switchboard database's URL.
func privateCluster(t *testing.T, maxConns int) string {
	t.Helper()
	ctx := context.Background()
	dir := clusterDir(t)
	cluster, err := localpg.Start(ctx, filepath.Join(dir, "data"), 0)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET max_connections = %d", maxConns))
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port := cluster.Port
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	if cluster, err = localpg.Start(ctx, filepath.Join(dir, "data"), port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	url, err := localpg.EnsureDatabase(ctx, cluster.URL("postgres"), "switchboard")
	if err != nil {
		t.Fatal(err)
	}
	return url
}

var pollsRE = regexp.MustCompile(`"msg":"telegram: (this instance polls for updates|stopped polling)"`)

// pollingLeader is the index of the process that polls Telegram now (-1: none).
func pollingLeader(procs []*serveProc) int {
	for i, p := range procs {
		m := pollsRE.FindAllStringSubmatch(p.Stderr.String(), -1)
		if len(m) > 0 && m[len(m)-1][1] == "this instance polls for updates" {
			return i
		}
	}
	return -1
}

// raiseOpenFiles lifts the soft open-files limit to the hard one and
// fails when that is below need (the clients' and servers' sockets).
func raiseOpenFiles(need uint64) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return err
		}
	}
	if rl.Cur < need {
		return fmt.Errorf("open-files limit %d is below the %d needed (ulimit -Hn)", rl.Cur, need)
	}
	return nil
}
