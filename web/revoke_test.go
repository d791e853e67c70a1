package web_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/web"
)

// waitClosed reads until the websocket is closed and returns its close
// status (-1: still open after the bound).
func waitClosed(t *testing.T, c *wsClient, bound time.Duration) websocket.StatusCode {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		_, err := c.next(time.Until(deadline))
		if err == nil {
			continue // a frame sent before the close
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return -1
		}
		return websocket.CloseStatus(err)
	}
	return -1
}

func dialWSWith(t *testing.T, base string, hdr http.Header) (*wsClient, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/ws", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode
		}
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn}, 101
}

// TestTokenResetClosesLiveWebsockets: websockets opened with the old token
// on two instances of one database are closed (1008) soon after a token
// reset, as `switchboard token reset` does it (the new hash stored, every
// session deleted); the old token then gets 401 and the new one works. A
// logout on one instance closes the websocket of that session on the other.
func TestTokenResetClosesLiveWebsockets(t *testing.T) {
	t.Parallel()
	dbtest.Reserve(t, twoInstanceConns)
	url := newSchemaURL(t)
	// Instances as `serve` runs them: the owner's token is the one stored.
	start := func() *instance {
		in := apptest.Start(t, apptest.Options{DatabaseURL: url, Configure: func(o *app.Config) { o.OwnerToken = ""; o.Stdout = io.Discard }})
		return &instance{URL: in.URL, Store: in.Store, Hub: in.Hub, Chat: in.Chat}
	}
	a := start()
	if err := a.Store.ReplaceOwnerTokenHash(t.Context(), web.HashToken(testToken)); err != nil {
		t.Fatal(err)
	}
	b := start()
	bearer := http.Header{"Authorization": {"Bearer " + testToken}}

	// A logout ends the session's websocket on the other instance.
	ck := login(t, a.URL)
	bySession, status := dialWSWith(t, b.URL, http.Header{"Cookie": {ck}})
	if status != 101 {
		t.Fatalf("dial with a session: %d", status)
	}
	bySession.untilReady()
	if r, _ := do(t, "POST", a.URL+"/logout", "", "", "Cookie", ck, "Origin", a.URL); r.StatusCode >= 400 {
		t.Fatalf("logout: %d", r.StatusCode)
	}
	if got := waitClosed(t, bySession, 15*time.Second); got != websocket.StatusPolicyViolation {
		t.Fatalf("the session's websocket after a logout: close status %d, want %d", got, websocket.StatusPolicyViolation)
	}

	var clients []*wsClient
	for _, in := range []*instance{a, b} {
		c, status := dialWSWith(t, in.URL, bearer)
		if status != 101 {
			t.Fatalf("dial: %d", status)
		}
		c.untilReady()
		clients = append(clients, c)
	}
	ck = login(t, b.URL)
	byCookie, _ := dialWSWith(t, a.URL, http.Header{"Cookie": {ck}})
	byCookie.untilReady()
	// Still connected while the token is unchanged.
	post(t, a.URL, "before the reset")
	for _, c := range append(clients, byCookie) {
		c.messages(1)
	}

	const newToken = "the-new-owner-token-9876543210"
	if err := a.Store.ReplaceOwnerTokenHash(t.Context(), web.HashToken(newToken)); err != nil {
		t.Fatal(err)
	}
	if err := a.Store.DeleteAllSessions(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, c := range append(clients, byCookie) {
		if got := waitClosed(t, c, 15*time.Second); got != websocket.StatusPolicyViolation {
			t.Errorf("websocket %d after the reset: close status %d, want %d", i, got, websocket.StatusPolicyViolation)
		}
	}
	for _, in := range []*instance{a, b} {
		if _, status := dialWSWith(t, in.URL, bearer); status != http.StatusUnauthorized {
			t.Errorf("a new websocket with the old token: %d, want 401", status)
		}
		if _, status := dialWSWith(t, in.URL, http.Header{"Cookie": {ck}}); status != http.StatusUnauthorized {
			t.Errorf("a new websocket with the old session: %d, want 401", status)
		}
		if c, status := dialWSWith(t, in.URL, http.Header{"Authorization": {"Bearer " + newToken}}); status != 101 {
			t.Errorf("a websocket with the new token: %d", status)
		} else {
			c.untilReady()
		}
	}
}
