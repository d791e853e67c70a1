package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func isChildCall(r llmtest.Request) bool {
	return strings.Contains(string(r.Body), "You are a sub-agent")
}

func delegateCalls(tasks ...string) llmtest.Reply {
	var calls []llmtest.ToolCall
	for _, task := range tasks {
		args, _ := json.Marshal(map[string]string{"task": task})
		calls = append(calls, llmtest.ToolCall{Name: "delegate", Arguments: string(args)})
	}
	return llmtest.Reply{ToolCalls: calls}
}

// delegating scripts the fake model for one delegated task: main delegates
// task, the delegated work answers worker, and main then answers answer.
func delegating(task, worker, answer string) func(llmtest.Request) llmtest.Reply {
	return func(r llmtest.Request) llmtest.Reply {
		switch {
		case isChildCall(r):
			return llmtest.Text(worker)
		case r.LastIsToolResult:
			return llmtest.Text(answer)
		}
		return delegateCalls(task)
	}
}

var scopedOn = services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true}

func childRuns(t *testing.T, b *bundle, parent int64) []services.Run {
	kids, err := b.store.ListRuns(context.Background(), services.RunQuery{ParentRunID: parent, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return kids
}

func TestParallelChildrenAreIsolated(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: scopedOn})
	ws := filepath.Join(b.ws, "global")
	_ = os.MkdirAll(ws, 0o700)
	_ = os.WriteFile(filepath.Join(ws, "notes.md"), []byte("RAW CHILD STEP DATA"), 0o600)
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		body := string(r.Body)
		switch {
		case isChildCall(r) && strings.Contains(body, "task Alpha") && !r.LastIsToolResult:
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.md"}`}}, Delay: 300 * time.Millisecond}
		case isChildCall(r) && strings.Contains(body, "task Alpha"):
			return llmtest.Text("Alpha done: the notes say hello")
		case isChildCall(r):
			return llmtest.Reply{Text: "Beta done: nothing found", Delay: 300 * time.Millisecond}
		case r.LastIsToolResult:
			return llmtest.Text("Both tasks are done.")
		}
		return delegateCalls("task Alpha: read notes.md", "task Beta: look around")
	})
	q := b.say(t, "secret main history: please do Alpha and Beta")
	msgs := b.waitVisible(t, 4) // question, two handoff markers, answer
	main := b.runOf(t, q.ID)
	kids := childRuns(t, b, main.ID)
	if len(kids) != 2 {
		t.Fatalf("%d child runs", len(kids))
	}
	for _, k := range kids {
		if k.Status != services.RunOK || !strings.HasPrefix(k.ContextScope, "run:") || k.ParentRunID != main.ID {
			t.Fatalf("child: %+v", k)
		}
	}
	// They ran side by side.
	a, c := kids[0], kids[1]
	if !(a.StartedAt.Before(*c.FinishedAt) && c.StartedAt.Before(*a.FinishedAt)) {
		t.Fatalf("children did not overlap: %v-%v and %v-%v", a.StartedAt, a.FinishedAt, c.StartedAt, c.FinishedAt)
	}
	var markers int
	for _, m := range msgs {
		var meta struct{ Kind string }
		_ = json.Unmarshal(m.Metadata, &meta)
		if meta.Kind == "handoff" {
			markers++
		}
	}
	if markers != 2 || !strings.Contains(msgs[len(msgs)-1].Content, "Both tasks are done.") {
		t.Fatalf("timeline: %d markers, last %q", markers, msgs[len(msgs)-1].Content)
	}
	for _, r := range b.model.Requests() {
		body := string(r.Body)
		if isChildCall(r) {
			// Main's conversation reaches a child only as observations
			// recalled for its task, each naming its source.
			if strings.Contains(body, "secret main history") {
				recalled := false
				for _, o := range childPayload(t, r).Observations {
					recalled = recalled || o.Source == fmt.Sprintf("m%d", q.ID) && strings.Contains(o.Text, "secret main history")
				}
				if !recalled {
					t.Fatal("a child saw main's raw history")
				}
			}
			if strings.Contains(body, "task Alpha") && strings.Contains(body, "task Beta") {
				t.Fatal("a child saw its sibling's task")
			}
			continue
		}
		if strings.Contains(body, "RAW CHILD STEP DATA") {
			t.Fatal("main saw a child's raw step")
		}
	}
	// The main agent read both handoffs.
	last := b.model.Requests()[len(b.model.Requests())-1]
	if !strings.Contains(string(last.Body), "Alpha done") || !strings.Contains(string(last.Body), `\"kind\":\"handoff\"`) {
		t.Fatalf("main's last prompt lacks the handoffs: %s", last.Body)
	}
	// Child rows are hidden in their own scopes; the next main prompt has none of them.
	all, _ := b.store.ListTimeline(context.Background(), services.TimelineQuery{TimelineScope: "global", IncludeHidden: true})
	for _, m := range all {
		if strings.HasPrefix(m.ContextScope, "run:") && m.Visible {
			t.Fatalf("child row visible: %+v", m)
		}
	}
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply { return llmtest.Text("ok") })
	b.say(t, "next")
	b.waitVisible(t, 6)
	reqs := b.model.Requests()
	body := string(reqs[len(reqs)-1].Body)
	if strings.Contains(body, "RAW CHILD STEP DATA") || strings.Contains(body, "Task payload") {
		t.Fatalf("a child step entered a later main prompt: %s", body)
	}
	// /subagents lists them.
	b.say(t, "/subagents")
	msgs = b.waitVisible(t, 8)
	if !strings.Contains(msgs[len(msgs)-1].Content, "ok") || !strings.Contains(msgs[len(msgs)-1].Content, "run:") {
		t.Fatalf("/subagents: %q", msgs[len(msgs)-1].Content)
	}
}

func TestHardConstraintReachesTheChild(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: scopedOn})
	if _, err := b.store.CreateConstraint(context.Background(), services.Constraint{TimelineScope: "global", Text: "Never touch the billing folder.", Hard: true}); err != nil {
		t.Fatal(err)
	}
	b.model.SetDefault(delegating("clean up files", "done", "finished"))
	b.say(t, "clean up")
	b.waitVisible(t, 3)
	for _, r := range b.model.Requests() {
		if isChildCall(r) && !strings.Contains(string(r.Body), "Never touch the billing folder.") {
			t.Fatalf("the owner's hard constraint did not reach the child: %s", r.Body)
		}
	}
}

func TestStopCancelsTheTree(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: scopedOn})
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isChildCall(r) {
			return llmtest.Reply{Text: "too late", Delay: 20 * time.Second}
		}
		if r.LastIsToolResult {
			return llmtest.Text("after the children")
		}
		return delegateCalls("slow one", "slow two")
	})
	q := b.say(t, "go")
	if !poll(waitLong, func() bool {
		kids := childRuns(t, b, b.runOf(t, q.ID).ID)
		return len(kids) == 2 && kids[0].Status == services.RunRunning && kids[1].Status == services.RunRunning
	}) {
		t.Fatal("children never started")
	}
	b.say(t, "/stop")
	var main services.Run
	var kids []services.Run
	if !poll(waitLong, func() bool {
		main = b.runOf(t, q.ID)
		kids = childRuns(t, b, main.ID)
		return main.Status == services.RunCancelled && kids[0].Status == services.RunCancelled && kids[1].Status == services.RunCancelled
	}) {
		for _, k := range kids {
			steps, _ := b.store.ListSteps(context.Background(), k.ID)
			for _, st := range steps {
				t.Logf("child %d step %s %s", k.ID, st.Kind, st.Payload)
			}
		}
		msteps, _ := b.store.ListSteps(context.Background(), main.ID)
		for _, st := range msteps {
			t.Logf("main step %s %s", st.Kind, st.Payload)
		}
		t.Fatalf("tree not cancelled: main %s, children %s %s", main.Status, kids[0].Status, kids[1].Status)
	}
	page, _ := b.chat.Timeline(context.Background(), "global", 0, 0, 100)
	for _, m := range page.Messages {
		if strings.Contains(m.Content, "after the children") || strings.Contains(m.Content, "too late") {
			t.Fatalf("an answer got out after /stop: %q", m.Content)
		}
	}
}

func TestInlineWhenSubAgentsOff(t *testing.T) {
	t.Parallel()
	for _, flags := range []services.Flags{{ScopedWrite: true, ScopedRead: true, SubAgents: false}, {ScopedWrite: true, SubAgents: true}} {
		// A subtest each: its runtime (and its pool) stops before the next
		// starts, so the test holds one runtime's connections, not two.
		t.Run(fmt.Sprintf("SubAgents=%v", flags.SubAgents), func(t *testing.T) {
			b := setup(t, setupOpts{flags: flags})
			b.model.SetDefault(delegating("a task", "inline result", "done inline"))
			q := b.say(t, "delegate please")
			msgs := b.waitVisible(t, 2)
			if msgs[len(msgs)-1].Content != "done inline" {
				t.Fatalf("%+v: %q", flags, msgs[len(msgs)-1].Content)
			}
			main := b.runOf(t, q.ID)
			if kids := childRuns(t, b, main.ID); len(kids) != 0 {
				t.Fatalf("%+v: inline must not create child runs, got %d", flags, len(kids))
			}
			all, _ := b.store.ListTimeline(context.Background(), services.TimelineQuery{TimelineScope: "global", IncludeHidden: true})
			for _, m := range all {
				if m.ContextScope != "main" {
					t.Fatalf("%+v: row outside main: %+v", flags, m)
				}
			}
			if got := stepKinds(t, b.store, main.ID); !strings.Contains(got, "handoff") {
				t.Fatalf("%+v: steps %s", flags, got)
			}
			// The run pays for every model call made for it, the inline
			// task's included (the fake reports a quarter of each body).
			reqs := b.model.Requests()
			want := 0
			for _, r := range reqs {
				want += max(1, len(r.Body)/4)
			}
			if len(reqs) < 3 || main.PromptTokens != want {
				t.Fatalf("%+v: run's prompt tokens %d, the %d model calls' %d", flags, main.PromptTokens, len(reqs), want)
			}
		})
	}
}
