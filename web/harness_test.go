package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/hub"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
	"github.com/switchboard/switchboard/web/wire"
)

// TestMain is apptest.Main (each test counts as apptest.TestShare in the
// suite's connection budget: 5 to 10 connections were measured per test
// of this package), then stops the browser the tests share. A test
// holding more by design (two instances) reserves its own
// (dbtest.Reserve); one found holding more has its holding raised while
// it runs.
func TestMain(m *testing.M) {
	apptest.Main(m, browsertest.Close)
}

// twoInstanceConns is what a test starting two instances on one schema
// reserves (dbtest.Reserve): 14 and 16 measured.
const twoInstanceConns = 18

const testToken = "test-owner-token-0123456789"

// instance is one Switchboard web instance: its own pool, hub and LISTEN
// connection, like a separate process on the same database.
type instance struct {
	URL   string
	Store *repository.Store
	Hub   *hub.Hub
	Chat  *chat.Service
}

func newInstance(t testing.TB, url string) *instance {
	t.Helper()
	pool := dbtest.PoolFor(t, url)
	return newInstanceOnPool(t, pool)
}

func newInstanceOnPool(t testing.TB, pool *pgxpool.Pool) *instance {
	return newInstanceWithModel(t, pool, nil)
}

// newInstanceWithModel is an instance whose agent answers with the fake
// model (nil: no agent).
func newInstanceWithModel(t testing.TB, pool *pgxpool.Pool, model *llmtest.Server) *instance {
	return newStack(t, pool, stackOpts{model: model})
}

// newInstanceWithAgent is newInstanceWithModel with rollout flags.
func newInstanceWithAgent(t testing.TB, pool *pgxpool.Pool, model *llmtest.Server, flags services.Flags) *instance {
	return newStack(t, pool, stackOpts{model: model, flags: flags})
}

// stackOpts shape a test instance: with a model, the agent answers.
type stackOpts struct {
	model *llmtest.Server
	flags services.Flags
}

// newStack starts a whole instance on pool's schema (apptest, the app serve
// builds): with a model the agent answers, without one nobody does.
func newStack(t testing.TB, pool *pgxpool.Pool, o stackOpts) *instance {
	t.Helper()
	in := apptest.Start(t, apptest.Options{
		DatabaseURL: pool.Config().ConnString(), Model: o.model, Flags: o.flags, Token: testToken,
	})
	return &instance{URL: in.URL, Store: in.Store, Hub: in.Hub, Chat: in.Chat}
}

// do and newSchemaURL are apptest's: the request helper and a migrated
// schema's URL, shared with the other packages testing over HTTP.
var (
	do           = apptest.Do
	newSchemaURL = apptest.SchemaURL
)

func post(t testing.TB, base, content string) wire.Message {
	t.Helper()
	return postAs(t, base, "", content)
}

// postAs posts content as a client naming source ("": none, a script).
func postAs(t testing.TB, base, source, content string) wire.Message {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"content": content, "source": source})
	resp, body := do(t, "POST", base+"/api/messages", testToken, string(b))
	if resp.StatusCode != 201 {
		t.Fatalf("post: %d %s", resp.StatusCode, body)
	}
	var out struct{ Message wire.Message }
	_ = json.Unmarshal([]byte(body), &out)
	return out.Message
}

// wsClient reads frames from a websocket.
type wsClient struct {
	t    testing.TB
	conn *websocket.Conn
}

func dialWS(t testing.TB, base, query string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/ws" + query
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn}
}

func (c *wsClient) next(timeout time.Duration) (wire.Frame, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, b, err := c.conn.Read(ctx)
	if err != nil {
		return wire.Frame{}, err
	}
	var f wire.Frame
	if err := json.Unmarshal(b, &f); err != nil {
		return wire.Frame{}, err
	}
	return f, nil
}

// untilReady returns the message ids before the "ready" frame.
func (c *wsClient) untilReady() []int64 {
	c.t.Helper()
	var ids []int64
	for {
		f, err := c.next(5 * time.Second)
		if err != nil {
			c.t.Fatalf("waiting for ready: %v", err)
		}
		switch f.Type {
		case "ready":
			return ids
		case "message":
			ids = append(ids, f.Message.ID)
		}
	}
}

// messages reads n message frames.
func (c *wsClient) messages(n int) []wire.Message {
	c.t.Helper()
	var out []wire.Message
	for len(out) < n {
		f, err := c.next(5 * time.Second)
		if err != nil {
			c.t.Fatalf("after %d of %d messages: %v", len(out), n, err)
		}
		if f.Type == "message" {
			out = append(out, *f.Message)
		}
	}
	return out
}
