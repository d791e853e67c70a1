package app_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestTodoRecapAndAtPathReminderInARealPrompt: the agent sets its task
// list with the todo tool; the next prompt (the request the fake model
// records) ends with the @path reminder of the owner's message and then
// the todo recap, and history (the scoped read path, which carries main's
// tool steps) keeps the todo call's result as one line.
func TestTodoRecapAndAtPathReminderInARealPrompt(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	// The scoped read path: history carries main's tool steps.
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) { o.Agent.ToolsDeferOver = 0 }})
	model.Enqueue(
		llmtest.Call("todo", `{"items":[{"text":"read the plan","done":true},{"text":"write the report"}]}`),
		llmtest.Text("Planned."),
		llmtest.Text("Summarised."))
	ask(t, in, "plan the work")
	ask(t, in, "now summarise @notes.md please")
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	if !reqs[1].LastIsToolResult || !strings.Contains(reqs[1].LastMessage, `"items":2,"done":1`) {
		t.Fatalf("the todo call's result (newest turn, whole): %q", reqs[1].LastMessage)
	}
	last := reqs[2].LastMessage
	reminder := strings.Index(last, "The user mentioned @notes.md.")
	recap := strings.Index(last, "[Todo recap]\nYour task list")
	if reminder < 0 || recap < reminder || !strings.HasSuffix(last, "- [x] read the plan\n- [ ] write the report") {
		t.Fatalf("the last message of the next prompt:\n%s", last)
	}
	body := string(reqs[2].Body)
	if !strings.Contains(body, "[task list set: 2 items, 1 done; the current list is the todo recap at the end of the prompt]") ||
		strings.Contains(body, "The list is shown at the end of your prompt.") {
		t.Fatalf("history keeps the todo result whole:\n%s", body)
	}
}
