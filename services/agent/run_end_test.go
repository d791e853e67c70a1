package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/tools"
)

// TestStepLimitTellsTheOwnerHowToGoOn: a run that uses AGENT_MAX_STEPS
// without answering tells the owner so, with what it had got to and that
// "continue" goes on, instead of "Internal error."; "continue" then goes on
// with the earlier tool results in the prompt.
func TestStepLimitTellsTheOwnerHowToGoOn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxSteps: 2, flags: services.Flags{ScopedWrite: true, ScopedRead: true}})
	b.model.Enqueue(
		llmtest.Reply{Text: "Found the first two files.", ToolCalls: []llmtest.ToolCall{{Name: "list_files", Arguments: `{}`}}},
		llmtest.Reply{Text: "Still looking at the third.", ToolCalls: []llmtest.ToolCall{{Name: "list_files", Arguments: `{}`}}},
	)
	q := b.say(t, "look through every file")
	msgs := b.waitVisible(t, 2)
	notice := msgs[1].Content
	for _, want := range []string{"2 steps", "Still looking at the third.", `"continue"`} {
		if !strings.Contains(notice, want) {
			t.Fatalf("step-limit notice %q lacks %q", notice, want)
		}
	}
	if strings.Contains(notice, "Internal error") {
		t.Fatalf("step-limit notice: %q", notice)
	}
	if r := b.runOf(t, q.ID); r.Status != services.RunError || !strings.Contains(r.Error, "2 steps") {
		t.Fatalf("run: %s %q", r.Status, r.Error)
	}
	// "continue" goes on: the next prompt carries the calls and results.
	b.model.Enqueue(llmtest.Text("Done: three files."))
	b.say(t, "continue")
	msgs = b.waitVisible(t, 4)
	if msgs[3].Content != "Done: three files." {
		t.Fatalf("answer to continue: %q", msgs[3].Content)
	}
	reqs := b.model.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "Still looking at the third.") || !strings.Contains(body, `"tool_call_id"`) {
		t.Fatalf("the prompt after continue lacks the earlier steps: %s", body)
	}
}

// failingQueue refuses every job.
type failingQueue struct{}

func (failingQueue) EnqueueRunTx(context.Context, services.Tx, services.Run) error {
	return &services.Error{Kind: services.EUNAVAILABLE, Message: "queue down", Err: errors.New("insert failed")}
}

func (q failingQueue) StartRunTx(ctx context.Context, tx services.Tx, run services.Run) (func(context.Context, services.Message), error) {
	return nil, q.EnqueueRunTx(ctx, tx, run)
}

// TestRunRowAndJobCommitTogether: when the run's job cannot be inserted,
// the user's message and its run are not stored either (the client gets an
// error and retries), so no queued run is ever left without a job.
func TestRunRowAndJobCommitTogether(t *testing.T) {
	t.Parallel()
	// One test pool and no runtime: not the package's share for a test
	// starting one (apptest.TestConns).
	dbtest.Reserve(t, dbtest.PoolConns+1)
	store := dbtest.Store(t)
	model := llmtest.NewServer(t)
	provider, err := llm.New(llm.Config{Provider: "openai", BaseURL: model.OpenAIBaseURL(), Model: "gpt-4o-mini", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	manager, err := prompt.New(prompt.Deps{Store: store, Context: store}, prompt.Config{Window: 16000})
	if err != nil {
		t.Fatal(err)
	}
	var ag *agent.Service
	svc := chat.New(chat.Deps{Store: store, Turns: chat.TurnFunc(func(ctx context.Context, tx services.Tx, m services.Message) (func(context.Context), error) {
		return ag.StartTurn(ctx, tx, m)
	})}, chat.Config{})
	ag, err = agent.New(agent.Deps{Store: store, Chat: svc, Queue: failingQueue{}, LLM: provider, Tools: tools.NewRegistry(nil),
		Context: manager}, agent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.Post(context.Background(), services.PostParams{TimelineScope: "global", Source: "web", Content: "hello", DedupeKey: "k1"})
	if !services.IsKind(err, services.EUNAVAILABLE) {
		t.Fatalf("post with the queue down: %v; want EUNAVAILABLE", err)
	}
	runs, err := store.ListRuns(context.Background(), services.RunQuery{TimelineScope: "global", Limit: 10})
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs stored without a job: %+v %v", runs, err)
	}
	page, err := svc.Timeline(context.Background(), "global", 0, 0, 10)
	if err != nil || len(page.Messages) != 0 {
		t.Fatalf("message stored without its run's job: %+v %v", page.Messages, err)
	}
}

// TestStopClosesOpenCallsSoTheNextQuestionIsAnswered: /stop while an inline
// delegated task waits on the model leaves the main run's delegate call
// without a result of its own; the run's end stores one ("cancelled"), so
// the next question reaches a model that refuses unanswered calls, as
// OpenAI does, and is answered.
func TestStopClosesOpenCallsSoTheNextQuestionIsAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: false}})
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case isChildCall(r):
			return llmtest.Reply{Text: "too late", Delay: 5 * time.Minute} // /stop ends it first
		case strings.Contains(r.LastMessage, "slow task"):
			return delegateCalls("a slow task")
		}
		return llmtest.Echo(r)
	})
	q := b.say(t, "do the slow task")
	if !poll(waitLong, func() bool { return b.model.RequestCount() >= 2 }) {
		t.Fatal("the delegated task never called the model")
	}
	b.say(t, "/stop")
	if !poll(waitLong, func() bool { return b.runOf(t, q.ID).Status == services.RunCancelled }) {
		t.Fatalf("run not cancelled: %s", b.runOf(t, q.ID).Status)
	}
	b.say(t, "anything new?")
	var page services.TimelinePage
	var err error
	answered := poll(waitLong, func() bool {
		page, err = b.chat.Timeline(context.Background(), "global", 0, 0, 50)
		return err != nil || len(page.Messages) >= 6 // question, /stop, its reply, "Stopped.", question, answer
	})
	if err != nil {
		t.Fatal(err)
	}
	if !answered {
		// Say where the question is stuck: its run, and what the model
		// was asked since the stop.
		runs, _ := b.store.ListRuns(context.Background(), services.RunQuery{TimelineScope: "global", Limit: 10})
		var lines []string
		for _, r := range runs {
			lines = append(lines, fmt.Sprintf("run %d trigger %d parent %d: %s %s", r.ID, r.TriggerMessageID, r.ParentRunID, r.Status, r.Error))
		}
		for i, r := range b.model.Requests() {
			lines = append(lines, fmt.Sprintf("model request %d: child=%v last=%.80q", i+1, isChildCall(r), r.LastMessage))
		}
		t.Fatalf("the question after /stop was not answered (%d visible messages):\n%s\n%s", len(page.Messages), strings.Join(lines, "\n"), b.diagnose())
	}
	msgs := b.waitVisible(t, 6)
	if last := msgs[len(msgs)-1]; last.Content != "echo: anything new?" {
		var got []string
		for _, m := range msgs {
			got = append(got, m.Content)
		}
		t.Fatalf("after /stop: %q", got)
	}
}
