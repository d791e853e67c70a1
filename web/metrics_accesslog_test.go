package web_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const logSecretPhrase = "zebra-cobalt-lantern-4417"

// TestLogsHoldNoContentOrSecrets runs a scripted session (log in with the
// link and the form, post messages holding a known phrase through the API
// and the websocket, scrape metrics) and greps the captured debug-level
// logs: never a token, never the phrase unless LOG_CONTENT is on, and one
// access line per request with its request id.
func TestLogsHoldNoContentOrSecrets(t *testing.T) {
	t.Parallel()
	for _, logContent := range []bool{false, true} {
		in := newOpsInstance(t, logContent)
		do(t, "GET", in.URL+"/login?token="+url.QueryEscape(testToken), "", "")
		do(t, "POST", in.URL+"/login", "", "token="+url.QueryEscape(testToken), "Content-Type", "application/x-www-form-urlencoded")
		do(t, "GET", in.URL+"/login?token=wrong-"+testToken, "", "")
		post(t, in.URL, "api says "+logSecretPhrase)
		ws := dialWS(t, in.URL, "?after=0")
		ws.untilReady()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		frame, _ := json.Marshal(map[string]string{"type": "post", "content": "socket says " + logSecretPhrase, "client_key": "k1"})
		if err := ws.conn.Write(ctx, 1, frame); err != nil {
			t.Fatal(err)
		}
		cancel()
		ws.messages(1)
		do(t, "GET", in.URL+"/api/timeline?limit=5", testToken, "")
		do(t, "GET", in.URL+"/metrics", testMetricsToken, "")
		do(t, "GET", in.URL+"/no/such/page?token="+testToken, "", "")

		// A websocket's access line is written when it closes.
		ws.conn.Close(websocket.StatusNormalClosure, "")
		// The assertions below say what is missing if this gives up.
		poll(15*time.Second, func() bool { return strings.Contains(in.Logs.String(), `"route":"/api/ws"`) })
		logs := in.Logs.String()
		for _, secret := range []string{testToken, url.QueryEscape(testToken), testMetricsToken, "token="} {
			if strings.Contains(logs, secret) {
				t.Errorf("LOG_CONTENT=%v: logs contain %q:\n%s", logContent, secret, logs)
			}
		}
		if got := strings.Contains(logs, logSecretPhrase); got != logContent {
			t.Errorf("LOG_CONTENT=%v: message text in logs = %v:\n%s", logContent, got, logs)
		}
		// Access lines: route patterns and request ids, never raw paths.
		routes := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("not a JSON log line: %q", line)
			}
			if rec["msg"] != "request" {
				continue
			}
			if id, _ := rec["request_id"].(string); len(id) < 8 {
				t.Errorf("access line without a request id: %s", line)
			}
			routes[rec["method"].(string)+" "+rec["route"].(string)] = true
		}
		for _, want := range []string{"GET /login", "POST /login", "POST /api/messages", "GET /api/ws", "GET /api/timeline", "GET /metrics", "GET unmatched"} {
			if !routes[want] {
				t.Errorf("no access line for %s (have %v)", want, routes)
			}
		}
	}
}
