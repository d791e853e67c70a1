package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/switchboard/switchboard/internal/servetest"
	"github.com/switchboard/switchboard/repository/dbtest"
)

// The binary-running helpers live in internal/servetest, shared with e2e.
func TestMain(m *testing.M) { servetest.Main(m) }

var (
	buildBinary = servetest.Binary
	freshDB     = servetest.FreshDB
	migratedDB  = servetest.MigratedDB
	startServe  = servetest.Start
	newTokenRE  = servetest.NewTokenRE
)

func TestServeStartsMigratesAndAnswersHealth(t *testing.T) {
	bin := buildBinary(t)
	base := startServe(t, bin, freshDB(t))
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	var out, errOut strings.Builder
	if err := run(ctx, []string{"frobnicate"}, env(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown verb: %v", err)
	}
	if !strings.Contains(errOut.String(), "Usage:") {
		t.Fatal("usage not printed for an unknown verb")
	}
	err := run(ctx, []string{"serve"}, env(map[string]string{"AGENT_CONTEXT_SCOPED_READ": "1"}), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "AGENT_CONTEXT_SCOPED_WRITE=1") {
		t.Fatalf("0/1 flags must be refused at start: %v", err)
	}
	if err := run(ctx, []string{"migrate", "sideways"}, env(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), "up, down, status") {
		t.Fatalf("bad migrate verb: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"--help"}, env(nil), &out, &errOut); err != nil || !strings.Contains(out.String(), "AGENT_CONTEXT_SCOPED_WRITE") {
		t.Fatalf("help: %v", err)
	}
}

// TestTwoProcessesShareOneTimeline starts two real serve processes on one
// database: a message posted to one arrives on a websocket of the other.
func TestTwoProcessesShareOneTimeline(t *testing.T) {
	// Two processes starting within seconds of each other: each opens up
	// to 8 connections while it starts (migrations, River's services),
	// let go 2 s after (FrugalURL). Measured 16 at most, over the
	// package's share (servetest.ProcessConns).
	dbtest.Reserve(t, 16)
	bin := buildBinary(t)
	db := migratedDB(t)
	token := "two-process-token-0123456789"
	a := startServe(t, bin, db, "WEB_AUTH_TOKEN="+token)
	b := startServe(t, bin, db, "WEB_AUTH_TOKEN="+token)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b, "http")+"/api/ws?after=0",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	readFrame := func() map[string]any {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		_ = json.Unmarshal(data, &f)
		return f
	}
	if f := readFrame(); f["type"] != "ready" {
		t.Fatalf("first frame %v", f)
	}
	req, _ := http.NewRequest("POST", a+"/api/messages", strings.NewReader(`{"content":"across processes"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("post to A: %v %v", resp, err)
	}
	resp.Body.Close()
	f := readFrame()
	msg, _ := f["message"].(map[string]any)
	if f["type"] != "message" || msg["content"] != "across processes" {
		t.Fatalf("B got %v", f)
	}
}
