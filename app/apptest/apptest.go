// Package apptest starts whole Switchboard instances for tests: the app
// cmd/switchboard serves, built by app.New on a test schema, with a fake
// model (or a scripted answerer, or nobody answering), served over real HTTP.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/hub"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// Token is the owner's login token of an instance unless Options.Token says otherwise.
const Token = "apptest-owner-token-0123456789"

// Options shape an instance; the zero value is a server on a new schema
// where nobody answers.
type Options struct {
	// DatabaseURL selects a migrated schema (several instances on one
	// schema are several processes on one database); empty: a new schema.
	DatabaseURL string
	// Model answers as the agent's model (OpenAI API); nil with Turns nil:
	// user messages are stored and nobody answers.
	Model *llmtest.Server
	// Turns answers user messages instead of the agent runtime.
	Turns chat.TurnHandler
	Flags services.Flags
	// Token is the owner's login token (default Token).
	Token  string
	Logger *slog.Logger
	// Addr is the listen address (default 127.0.0.1:0).
	Addr string
	// Configure has the last word on the app's configuration.
	Configure func(*app.Config)
	// BeforeStart runs once the app is built, before it starts.
	BeforeStart func(*app.App)
}

// Instance is one running instance.
type Instance struct {
	URL   string
	Token string
	App   *app.App
	Store *repository.Store
	Chat  *chat.Service
	Hub   *hub.Hub

	lis       *trackingListener
	once      sync.Once
	crashOnce sync.Once
	stop      func()
	crash     func()
}

// nobody answers no user message.
type nobody struct{}

func (nobody) StartTurn(context.Context, services.Tx, services.Message) (func(context.Context), error) {
	return nil, nil
}

// SchemaURL creates a migrated schema and returns a URL selecting it.
func SchemaURL(t testing.TB) string {
	t.Helper()
	return dbtest.SchemaURL(dbtest.URL(t), dbtest.MigratedSchema(t))
}

// Do sends one request (hdr: header name, value, …) with token as its
// bearer token ("": none) and returns the response with its body read.
// Redirects are returned, not followed.
func Do(t testing.TB, method, url, token, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// PoolSize is a test instance's connection pool: enough for the few
// timelines a test runs at once (each busy timeline holds one connection
// for its lock and uses another), small enough that two packages' tests
// running two instances each stay within about 30 connections of a shared
// PostgreSQL.
const PoolSize = 8

// TestConns is the most one test starting an instance could open: an
// instance's pool (PoolSize, idle connections let go after 2 s), a test
// pool beside it, and a share of the package's schema connections.
const TestConns = PoolSize + dbtest.PoolConns + 2

// TestShare is what one test starting an instance counts for in the
// suite's connection budget (dbtest.SetTestConns): what such tests were
// measured to hold (the budget's count per test, application_name; the
// test command's end-of-run summary): 8 at the median and 10 at the 90th
// percentile in app, services/agent, web and the channels, so three of
// them fit the suite's budget of 28 at once. A test found holding more
// has its holding raised while it runs; one starting two instances
// reserves its own (dbtest.Reserve).
const TestShare = 9

// Main is TestMain for a package whose tests start instances: dbtest.Main
// with each test counted as TestShare, running after (a shared browser's
// Close, say) once the tests end.
func Main(m *testing.M, after ...func()) {
	dbtest.SetTestConns(TestShare)
	code := dbtest.Run(m)
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// FrugalURL is url with its pool letting idle connections go after two
// seconds (the service's default is 30 s): a test instance gives back what
// a burst opened instead of holding it for the rest of the test.
func FrugalURL(url string) string {
	return repository.WithParam(repository.WithParam(url, "pool_max_conn_idle_time", "2s"), "pool_health_check_period", "1s")
}

// Start builds, starts and serves an instance; it stops at the test's end.
func Start(t testing.TB, o Options) *Instance {
	t.Helper()
	if o.DatabaseURL == "" {
		o.DatabaseURL = SchemaURL(t)
	}
	if o.Token == "" {
		o.Token = Token
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	opts := app.Config{
		DatabaseURL:  FrugalURL(o.DatabaseURL),
		PoolSize:     PoolSize,
		Logger:       o.Logger,
		OwnerToken:   o.Token,
		WorkspaceDir: t.TempDir(),
		Agent:        agent.Config{Flags: o.Flags},
		Queue:        queueOptions(),
	}
	opts.Chat.ScopedWrite = o.Flags.ScopedWrite
	opts.Hooks.Turns = o.Turns
	opts.Context.ScopedRead = o.Flags.ScopedRead
	opts.Context.Compaction.ScopedWrite = o.Flags.ScopedWrite
	opts.Web.OwnerTimeline, opts.Web.Flags = services.DefaultTimeline, o.Flags
	switch {
	case o.Model != nil:
		opts.LLM.Provider, opts.LLM.BaseURL, opts.LLM.Model, opts.LLM.MaxRetries = "openai", o.Model.OpenAIBaseURL(), "gpt-4o-mini", -1
		opts.LLM.ContextWindow = 16000
	case o.Turns == nil:
		opts.Hooks.Turns = nobody{}
	}
	if o.Configure != nil {
		o.Configure(&opts)
	}
	a, err := app.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if o.BeforeStart != nil {
		o.BeforeStart(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		cancel()
		a.Close(context.Background())
		t.Fatal(err)
	}
	// The port of a crashed instance may take a moment to free: retry
	// every 20 ms for up to 10 s.
	var l net.Listener
	retry := time.NewTicker(20 * time.Millisecond)
	for i := 0; ; i++ {
		if l, err = net.Listen("tcp", o.Addr); err == nil || i == 500 {
			break
		}
		<-retry.C
	}
	retry.Stop()
	if err != nil {
		cancel()
		a.Close(context.Background())
		t.Fatal(err)
	}
	tl := &trackingListener{Listener: l}
	// Served as serve serves it: the web server's connection limits and
	// timeouts included.
	go func() { _ = a.Serve(tl) }()
	in := &Instance{URL: "http://" + l.Addr().String(), Token: o.Token, App: a, Store: a.Store(), Chat: a.Chat(), Hub: a.Hub(), lis: tl}
	in.crash = func() {
		tl.Close()
		tl.dropAll()
		_ = a.Web().Close()
	}
	in.stop = func() {
		in.Crash()
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		a.Close(sctx)
	}
	t.Cleanup(in.Stop)
	return in
}

// Stop stops the instance: Crash, then the app's background work and its
// database pool.
func (in *Instance) Stop() { in.once.Do(in.stop) }

// Crash stops serving the way a killed process does: the listener and every
// open connection (websockets included) gone at once. The store and
// ChatService keep working, like another instance on the same database,
// until the test ends.
func (in *Instance) Crash() { in.crashOnce.Do(in.crash) }

type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

func queueOptions() (o queue.Options) {
	o.PollInterval = 50 * time.Millisecond
	return o
}
