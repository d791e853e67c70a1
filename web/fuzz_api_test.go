package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard/switchboard/web/wire"
)

// contentTypes are the Content-Type headers the body fuzzer picks from.
var contentTypes = []string{"application/json", "", "text/plain", "application/json; charset=utf-8", "multipart/form-data; boundary=x"}

// FuzzPostMessageBody sends arbitrary bodies to POST /api/messages through
// the real handler and database: never a 5xx, every refusal is a 4xx with
// a JSON error, and a 201 stores exactly the content sent (200 answers a
// client_key seen before with the first message).
func FuzzPostMessageBody(f *testing.F) {
	in := newInstance(f, newSchemaURL(f))
	for _, s := range []string{`{"content":"hello"}`, `{"content":"hi","client_key":"k1","source":"tui"}`, `{"content":""}`,
		`{"content":"x","source":"telegram"}`, `{"content":"x","extra":1}`, `{"content":1}`, `{"content":"x"} {}`, `[`, ``,
		`{"content":"\ud800"}`, `{"content":"a","client_key":null}`, "{\"content\":\"\xff\"}", `null`, `{"content":"/new focus"}`} {
		f.Add([]byte(s), uint8(0))
	}
	f.Add([]byte(`{"content":"x"}`), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, ct uint8) {
		req, _ := http.NewRequest("POST", in.URL+"/api/messages", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if c := contentTypes[int(ct)%len(contentTypes)]; c != "" {
			req.Header.Set("Content-Type", c)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Error   string
			Message wire.Message
		}
		decErr := json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 500:
			t.Fatalf("%d for %q: %s", resp.StatusCode, body, out.Error)
		case resp.StatusCode >= 400:
			if decErr != nil || out.Error == "" {
				t.Fatalf("%d without a JSON error for %q", resp.StatusCode, body)
			}
		case resp.StatusCode == 200: // a repeated client_key: the first message comes back
		case resp.StatusCode == 201:
			var sent struct{ Content string }
			if json.Unmarshal(body, &sent) != nil || out.Message.Content != sent.Content {
				t.Fatalf("stored %q for %q", out.Message.Content, body)
			}
		default:
			t.Fatalf("unexpected %d for %q", resp.StatusCode, body)
		}
	})
}

// FuzzTimelineQuery sends arbitrary query parameters to GET /api/timeline:
// a 200 or a 400 naming the problem, never a 5xx.
func FuzzTimelineQuery(f *testing.F) {
	in := newInstance(f, newSchemaURL(f))
	post(f, in.URL, "one")
	f.Add("", "", "")
	f.Add("10", "", "5")
	f.Add("", "0", "500")
	f.Add("-1", "x", "501")
	f.Add("9223372036854775807", "", "0")
	f.Add("", "99999999999999999999", "1e3")
	f.Fuzz(func(t *testing.T, before, after, limit string) {
		q := url.Values{}
		for k, v := range map[string]string{"before": before, "after": after, "limit": limit} {
			if v != "" {
				q.Set(k, v)
			}
		}
		resp, body := do(t, "GET", in.URL+"/api/timeline?"+q.Encode(), testToken, "")
		if resp.StatusCode != 200 && resp.StatusCode != 400 {
			t.Fatalf("%d for %s: %s", resp.StatusCode, q.Encode(), body)
		}
	})
}

// FuzzWebsocketFrame sends arbitrary client frames over one live websocket:
// the server never crashes or answers "Internal error."; a bad frame gets
// an error frame and the connection stays usable (a marker frame sent after
// it is still answered), except a frame over the 64 KiB read limit, which
// closes the connection (then the fuzzer reconnects).
func FuzzWebsocketFrame(f *testing.F) {
	in := newInstance(f, newSchemaURL(f))
	var conn *websocket.Conn
	connect := func(t testing.TB) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(in.URL, "http")+"/api/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		c.SetReadLimit(1 << 20)
		conn = c
	}
	connect(f)
	f.Cleanup(func() { conn.CloseNow() })
	for _, s := range []string{`{"type":"post","content":"hi"}`, `{"type":"post","content":"hi","client_key":"k","source":"tui"}`,
		`{"type":"post","content":""}`, `{"type":"post","content":"x","source":"agent"}`, `{"type":"ready"}`, `{"type":"post","content":1}`,
		`{}`, `[]`, `null`, `{"type":"post","content":"x","message":{"id":1}}`, "\xff", ``} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"type":"post","content":"binary"}`), true)
	f.Fuzz(func(t *testing.T, frame []byte, binary bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		typ := websocket.MessageText
		if binary {
			typ = websocket.MessageBinary
		}
		if err := conn.Write(ctx, typ, frame); err != nil {
			connect(t)
			return
		}
		if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"marker"}`)); err != nil {
			connect(t)
			return
		}
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				if len(frame) > 64<<10 && websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
					connect(t)
					return
				}
				t.Fatalf("after frame %q: %v", frame, err)
			}
			var fr wire.Frame
			if err := json.Unmarshal(data, &fr); err != nil {
				t.Fatalf("server sent a frame that is not JSON: %q", data)
			}
			if fr.Type == "error" && strings.Contains(fr.Error, "Internal error") {
				t.Fatalf("internal error for frame %q", frame)
			}
			if fr.Type == "error" && strings.Contains(fr.Error, `"marker"`) {
				return
			}
		}
	})
}
