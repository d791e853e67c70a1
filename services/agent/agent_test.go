package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/hub"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/prompt"
)

func TestMain(m *testing.M) { apptest.Main(m) }

// bundle is a whole runtime on a fresh schema: real PostgreSQL, real River
// queue, real OpenAI SDK against the fake model server.
type bundle struct {
	store *repository.Store
	chat  *chat.Service
	agent *agent.Service
	queue *queue.Queue
	model *llmtest.Server
	ws    string
	db    *pgxpool.Pool
	hub   *hub.Hub
}

type setupOpts struct {
	runTimeout time.Duration
	maxSteps   int
	maxRetries int
	flags      services.Flags
	window     int
	keepTurns  int
	limits     agent.SubAgentLimits
	// llmTimeout bounds one model call (default 10 s).
	llmTimeout time.Duration
	// logger receives the app's log (default: discarded).
	logger *slog.Logger
	// toolsDeferOver is TOOLS_DEFER_OVER (0: nothing deferred).
	toolsDeferOver int
	// configure has the last word on the app's options.
	configure func(*app.Config)
}

// setupBench is setup for benchmarks.
func setupBench(b *testing.B, flags services.Flags, deferOver int) *bundle {
	return setupOn(b, apptest.SchemaURL(b), nil, setupOpts{flags: flags, window: 128000, toolsDeferOver: deferOver})
}

func (b *bundle) sayB(tb testing.TB, text string) {
	if _, _, err := b.chat.Post(context.Background(), services.PostParams{TimelineScope: "global", Source: "web", Content: text}); err != nil {
		tb.Fatal(err)
	}
}

// waitAnswers waits until n answers from the agent are stored.
func (b *bundle) waitAnswers(tb testing.TB, n int) {
	answered := poll(waitLong, func() bool {
		page, _ := b.chat.Timeline(context.Background(), "global", 0, 0, 500)
		c := 0
		for _, m := range page.Messages {
			if m.Role == "assistant" && m.Source == "agent" && !strings.Contains(string(m.Metadata), `"kind": "handoff"`) {
				c++
			}
		}
		return c >= n
	})
	if !answered {
		tb.Fatalf("fewer than %d answers", n)
	}
}

func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	return setupOn(t, apptest.SchemaURL(t), nil, o)
}

// setupOn builds the app serve builds (app.New, without HTTP) on an
// existing schema (flag changes mid-conversation), with the given fake
// model or a new one.
// testNow is the agent tests' clock for prompts.
var testNow = time.Date(2026, 3, 4, 9, 15, 0, 0, time.UTC)

func setupOn(t testing.TB, dbURL string, model *llmtest.Server, o setupOpts) *bundle {
	t.Helper()
	if model == nil {
		model = llmtest.NewServer(t)
	}
	retries := o.maxRetries
	if retries == 0 {
		retries = -1
	}
	window := o.window
	if window == 0 {
		window = 16000
	}
	llmTimeout := o.llmTimeout
	if llmTimeout == 0 {
		llmTimeout = 10 * time.Second
	}
	wsDir := t.TempDir()
	opts := app.Config{
		DatabaseURL: apptest.FrugalURL(dbURL), PoolSize: apptest.PoolSize, OwnerToken: "agent-test-owner-token-0123456789", WorkspaceDir: wsDir,
		LLM: llm.Config{Provider: "openai", BaseURL: model.OpenAIBaseURL(), Model: "gpt-4o-mini",
			ContextWindow: window, MaxRetries: retries, RetryBaseDelay: time.Millisecond, Timeout: llmTimeout},
		Agent: agent.Config{Flags: o.flags, SubAgents: o.limits, RunTimeout: o.runTimeout, MaxSteps: o.maxSteps, RequestRetention: time.Hour,
			ToolsDeferOver: o.toolsDeferOver},
		Queue:  queue.Options{PollInterval: 50 * time.Millisecond, ReapEvery: time.Hour},
		Logger: o.logger,
	}
	opts.Chat.ScopedWrite = o.flags.ScopedWrite
	opts.Context.ScopedRead = o.flags.ScopedRead
	opts.Context.Compaction = prompt.CompactionConfig{KeepTurns: o.keepTurns, ScopedWrite: o.flags.ScopedWrite, NoGlobal: o.flags.NoGlobalWrite}
	// A fixed clock and zone: prompts carry the date and time, and must be
	// the same bytes run after run (TestFlagMatrix).
	opts.Hooks.Context = func(d *prompt.Deps) { d.Now = func() time.Time { return testNow } }
	opts.Context.Location = time.UTC
	if o.configure != nil {
		o.configure(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		cancel()
		a.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		a.Close(sctx)
	})
	return &bundle{store: a.Store(), chat: a.Chat(), agent: a.Agent(), queue: a.Queue(), model: model, ws: wsDir, db: a.Pool(), hub: a.Hub()}
}

func (b *bundle) say(t *testing.T, text string) services.Message {
	t.Helper()
	m, _, err := b.chat.Post(context.Background(), services.PostParams{TimelineScope: "global", Source: "web", Content: text})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitLong bounds the tests' waits for a turn: under -race on a loaded
// two-core machine (a full suite beside other work) one turn has taken
// over 15 s. It bounds a wait; nothing is timed.
const waitLong = 90 * time.Second

// park stops an instance the test is done running but still reads (a
// flag change mid-conversation starts the next one on the same schema):
// its queue stops and its pool gives its connections back at once, so
// instances left behind do not add up (the package's connection peak).
// Reads through its store afterwards open one connection as needed.
func (b *bundle) park() {
	b.queue.Stop(context.Background())
	b.db.Reset()
}

// waitVisible waits until the timeline holds n visible messages.
func (b *bundle) waitVisible(t *testing.T, n int) []services.Message {
	t.Helper()
	return b.waitVisibleFor(t, n, waitLong)
}

// waitVisibleFor is waitVisible with its own deadline.
func (b *bundle) waitVisibleFor(t *testing.T, n int, d time.Duration) []services.Message {
	t.Helper()
	var page services.TimelinePage
	var err error
	if poll(d, func() bool {
		page, err = b.chat.Timeline(context.Background(), "global", 0, 0, 500)
		return err != nil || len(page.Messages) >= n
	}) && err == nil {
		return page.Messages
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page.Messages {
		got = append(got, string(m.Role)+"/"+string(m.Source)+": "+m.Content)
	}
	t.Fatalf("timeline has %d visible messages, want %d:\n%s\n%s", len(page.Messages), n, strings.Join(got, "\n"), b.diagnose())
	return nil
}

// diagnose says what the instance is doing when a wait timed out: its
// pool's use and every goroutine's stack (a run stuck on a lock, a
// connection or the model shows there).
func (b *bundle) diagnose() string {
	st := b.db.Stat()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return fmt.Sprintf("pool: %d/%d acquired, %d idle, %d acquires had to wait (%s in all)\ngoroutines:\n%s",
		st.AcquiredConns(), st.MaxConns(), st.IdleConns(), st.EmptyAcquireCount(), st.EmptyAcquireWaitTime(), buf)
}

func (b *bundle) runOf(t *testing.T, trigger int64) services.Run {
	t.Helper()
	runs, err := b.store.ListRuns(context.Background(), services.RunQuery{TimelineScope: "global", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.TriggerMessageID == trigger && r.ParentRunID == 0 {
			return r
		}
	}
	t.Fatalf("no run for message %d", trigger)
	return services.Run{}
}

func stepKinds(t *testing.T, s *repository.Store, run int64) string {
	steps, err := s.ListSteps(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var k []string
	for _, st := range steps {
		k = append(k, string(st.Kind))
	}
	return strings.Join(k, ",")
}

func TestPlainAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(llmtest.Text("Hello! How can I help?"))
	q := b.say(t, "hi there")
	msgs := b.waitVisible(t, 2)
	a := msgs[1]
	if a.Role != "assistant" || a.Source != "agent" || a.Content != "Hello! How can I help?" {
		t.Fatalf("answer: %+v", a)
	}
	var meta struct{ RunID, ReplyTo int64 }
	_ = json.Unmarshal(a.Metadata, &struct {
		RunID   *int64 `json:"run_id"`
		ReplyTo *int64 `json:"reply_to"`
	}{&meta.RunID, &meta.ReplyTo})
	run := b.runOf(t, q.ID)
	if meta.RunID != run.ID || meta.ReplyTo != q.ID {
		t.Fatalf("answer metadata %s, run %d", a.Metadata, run.ID)
	}
	if run.Status != services.RunOK || run.PromptTokenBudget == 0 || run.EstimatedPromptTokens == 0 || run.ModelContextWindow != 16000 || run.PromptTokens == 0 || run.FinishedAt == nil {
		t.Fatalf("run not recorded fully: %+v", run)
	}
	if got := stepKinds(t, b.store, run.ID); got != "prompt,model_call" {
		t.Fatalf("steps: %s", got)
	}
	// The prompt sent carried the system prompt and the user's text.
	req := b.model.Requests()[0]
	if req.LastMessage != "hi there" || !strings.Contains(string(req.Body), "owner's assistant") {
		t.Fatalf("request: %s", req.Body)
	}
}

func TestMultiStepToolUse(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: services.Flags{ScopedWrite: true, ScopedRead: true}})
	b.model.Enqueue(
		llmtest.Call("write_file", `{"path":"notes/todo.md","content":"- buy milk\n"}`),
		llmtest.Call("read_file", `{"path":"notes/todo.md"}`),
		llmtest.Text("Saved your list: buy milk."),
	)
	q := b.say(t, "save my todo list")
	msgs := b.waitVisible(t, 2)
	if msgs[1].Content != "Saved your list: buy milk." {
		t.Fatalf("answer: %q", msgs[1].Content)
	}
	run := b.runOf(t, q.ID)
	if got := stepKinds(t, b.store, run.ID); got != "prompt,model_call,tool_call,tool_result,model_call,tool_call,tool_result,model_call" {
		t.Fatalf("steps: %s", got)
	}
	data, err := os.ReadFile(filepath.Join(b.ws, "global", "notes", "todo.md"))
	if err != nil || string(data) != "- buy milk\n" {
		t.Fatalf("file: %q %v", data, err)
	}
	// Tool calls and results are hidden rows in main, each call with its result.
	all, _ := b.store.ListTimeline(context.Background(), services.TimelineQuery{TimelineScope: "global", IncludeHidden: true})
	var hidden []string
	for _, m := range all {
		if !m.Visible {
			if m.ContextScope != "main" {
				t.Fatalf("step stored outside main: %+v", m)
			}
			hidden = append(hidden, string(m.Role))
		}
	}
	if strings.Join(hidden, ",") != "assistant,tool,assistant,tool" {
		t.Fatalf("hidden rows: %v", hidden)
	}
	// The third model call saw the read result.
	reqs := b.model.Requests()
	if len(reqs) != 3 || !reqs[2].LastIsToolResult || !strings.Contains(reqs[2].LastMessage, "buy milk") {
		t.Fatalf("third request: %+v", reqs[len(reqs)-1].LastMessage)
	}
	// The next turn's prompt carries the earlier tool pair (scoped read).
	b.model.Enqueue(llmtest.Text("ok"))
	b.say(t, "thanks")
	b.waitVisible(t, 4)
	body := string(b.model.Requests()[3].Body)
	if !strings.Contains(body, "write_file") || !strings.Contains(body, `"tool_call_id"`) {
		t.Fatalf("history lost the tool pair: %s", body)
	}
}

func TestSandboxRefusesEscapes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(llmtest.Call("read_file", `{"path":"../../../etc/passwd"}`), llmtest.Text("I can't read that."))
	b.say(t, "read /etc/passwd")
	b.waitVisible(t, 2)
	reqs := b.model.Requests()
	last := reqs[len(reqs)-1]
	if !last.LastIsToolResult || !strings.Contains(last.LastMessage, "TOOL_PATH_REFUSED") || strings.Contains(last.LastMessage, "root:") {
		t.Fatalf("tool result: %s", last.LastMessage)
	}
}

func TestProviderOutageTellsTheUser(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxRetries: 2})
	b.model.Enqueue(llmtest.Status(500, ""), llmtest.Status(503, ""), llmtest.Status(500, ""))
	q := b.say(t, "are you there?")
	msgs := b.waitVisible(t, 2)
	n := msgs[1]
	// The notice says what the server answered, not "unreachable", and
	// leaves the server's address to the logs.
	if n.Source != "system" || !strings.HasPrefix(n.Content, "I could not answer:") ||
		!strings.Contains(n.Content, "The model server answered HTTP 500") || strings.Contains(n.Content, "unreachable") ||
		strings.Contains(n.Content, "http://") {
		t.Fatalf("notice: %+v", n)
	}
	run := b.runOf(t, q.ID)
	if run.Status != services.RunError || b.model.RequestCount() != 3 {
		t.Fatalf("run %s after %d requests", run.Status, b.model.RequestCount())
	}
	if got := stepKinds(t, b.store, run.ID); got != "prompt,error" {
		t.Fatalf("steps: %s", got)
	}
}

func TestMessagesDuringARunAreAnsweredInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(llmtest.Reply{Text: "first answer", Delay: 400 * time.Millisecond}, llmtest.Text("second answer"), llmtest.Text("third answer"))
	q1 := b.say(t, "one")
	// "two" and "three" arrive while the first run waits on the model.
	if !poll(waitLong, func() bool { return b.model.RequestCount() >= 1 }) {
		t.Fatal("the first question never reached the model")
	}
	q2 := b.say(t, "two")
	q3 := b.say(t, "three")
	msgs := b.waitVisible(t, 6)
	var answers []string
	for _, m := range msgs {
		if m.Role == "assistant" {
			answers = append(answers, m.Content)
		}
	}
	if strings.Join(answers, "|") != "first answer|second answer|third answer" {
		t.Fatalf("answers: %v", answers)
	}
	for _, q := range []services.Message{q1, q2, q3} {
		if r := b.runOf(t, q.ID); r.Status != services.RunOK {
			t.Fatalf("run of %q: %s", q.Content, r.Status)
		}
	}
	// The second prompt ends with "two" and includes the first turn.
	body := string(b.model.Requests()[1].Body)
	if !strings.Contains(body, "first answer") || b.model.Requests()[1].LastMessage != "two" {
		t.Fatalf("second prompt: %s", body)
	}
}

func TestStopCancelsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// The answer would come after five minutes: the stop notice arriving
	// within the test's wait proves the stop cut the run, with no timing.
	b.model.Enqueue(llmtest.Reply{Text: "too late", Delay: 5 * time.Minute})
	q := b.say(t, "write a novel")
	if !poll(waitLong, func() bool { return b.runOf(t, q.ID).Status == services.RunRunning }) {
		t.Fatal("run never started")
	}
	b.say(t, "/stop")
	msgs := b.waitVisible(t, 4)
	var contents []string
	for _, m := range msgs {
		contents = append(contents, m.Content)
	}
	joined := strings.Join(contents, "|")
	if !strings.Contains(joined, "Stopping 1 run.") || !strings.Contains(joined, "Stopped.") || strings.Contains(joined, "too late") {
		t.Fatalf("timeline: %v", contents)
	}
	if r := b.runOf(t, q.ID); r.Status != services.RunCancelled {
		t.Fatalf("run status %s", r.Status)
	}
}

func TestRunTimeoutEndsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{runTimeout: 300 * time.Millisecond})
	b.model.Enqueue(llmtest.Reply{Text: "slow", Delay: 5 * time.Second})
	q := b.say(t, "hello")
	msgs := b.waitVisible(t, 2)
	if !strings.Contains(msgs[1].Content, "ran out of time") {
		t.Fatalf("notice: %q", msgs[1].Content)
	}
	if r := b.runOf(t, q.ID); r.Status != services.RunTimeout {
		t.Fatalf("status %s", r.Status)
	}
}

func TestOrphanedRunIsInterruptedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	// A run left 'running' by a worker that died: its lock is free.
	trigger, _, _ := b.store.InsertMessage(ctx, services.NewMessage{Role: "user", Source: "web", Content: "lost", Visible: true})
	run, err := b.store.CreateRun(ctx, services.NewRun{Source: "web", TriggerMessageID: trigger.ID, Status: services.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	b.queue.Reap(ctx)
	b.queue.Reap(ctx) // a second pass must not tell the user twice
	msgs := b.waitVisible(t, 2)
	if len(msgs) != 2 || !strings.Contains(msgs[1].Content, "interrupted") {
		t.Fatalf("timeline: %+v", msgs)
	}
	if r, _ := b.store.GetRun(ctx, run.ID); r.Status != services.RunInterrupted {
		t.Fatalf("status %s", r.Status)
	}
	// Executing it again (a retried job) does nothing.
	if err := b.agent.ExecuteRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if b.model.RequestCount() != 0 {
		t.Fatal("an interrupted run called the model")
	}
}

func TestCommandsNewAndStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(llmtest.Text("remembered: blue"))
	b.say(t, "my favourite colour is blue")
	b.waitVisible(t, 2)
	b.say(t, "/status")
	msgs := b.waitVisible(t, 4)
	if !strings.Contains(msgs[3].Content, "Model: gpt-4o-mini") || !strings.Contains(msgs[3].Content, "Last answer (run #") || msgs[3].Source != "system" {
		t.Fatalf("status: %q", msgs[3].Content)
	}
	// A second /status still reports the model's answer, not the first
	// /status (a command, answered without the model).
	b.say(t, "/status")
	msgs = b.waitVisible(t, 6)
	if !strings.Contains(msgs[5].Content, "Last answer (run #") || strings.Contains(msgs[5].Content, " 0 of 0 budget") {
		t.Fatalf("status after a command: %q", msgs[5].Content)
	}
	b.say(t, "/new")
	b.waitVisible(t, 8)
	b.model.Enqueue(llmtest.Text("fresh"))
	b.say(t, "what is my favourite colour?")
	b.waitVisible(t, 10)
	reqs := b.model.Requests()
	body := string(reqs[len(reqs)-1].Body)
	if strings.Contains(body, "blue") || strings.Contains(body, "/status") || strings.Contains(body, "Model:") {
		t.Fatalf("prompt after /new still carries old context or commands: %s", body)
	}
	// History is kept.
	all, _ := b.chat.Timeline(context.Background(), "global", 0, 0, 100)
	if !strings.Contains(all.Messages[0].Content, "blue") {
		t.Fatal("history lost")
	}
}

// TestStopKeepsThePartialAnswer: /stop while the answer streams keeps what
// was written so far, marked as stopped, instead of a bare "Stopped.".
func TestStopKeepsThePartialAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(llmtest.Reply{Text: "Once upon a time there was a switchboard that connected every voice in the valley", FragmentDelay: 150 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := b.hub.Subscribe(ctx, "global", 0)
	if err != nil {
		t.Fatal(err)
	}
	b.say(t, "tell me a story")
	// Stop once the answer has begun to stream (however slow the machine).
	for started := false; !started; {
		select {
		case it, ok := <-sub.Items():
			if !ok {
				t.Fatal("subscription closed")
			}
			started = it.Event != nil && it.Event.Type == services.EventDelta
		case <-ctx.Done():
			t.Fatal("the answer never began to stream")
		}
	}
	q := b.waitVisible(t, 1)[0]
	b.say(t, "/stop")
	msgs := b.waitVisible(t, 4)
	var kept string
	for _, m := range msgs {
		// How many words streamed before /stop depends on the machine's
		// load; the first one always has (the run was running 800 ms).
		if strings.HasPrefix(m.Content, "Once") {
			kept = m.Content
		}
	}
	if kept == "" || !strings.Contains(kept, "(stopped before the answer was finished)") || strings.Contains(kept, "valley") {
		var all []string
		for _, m := range msgs {
			all = append(all, m.Content)
		}
		t.Fatalf("after /stop mid-stream: %q", all)
	}
	if r := b.runOf(t, q.ID); r.Status != services.RunCancelled {
		t.Fatalf("run status %s", r.Status)
	}
}
