package prompt_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
)

// TestPromptRepairsDanglingToolCalls: stored history from before runs closed
// their open calls (an assistant message with two calls, one answered, then
// the run died) never reaches the model as a bare call: each call is
// followed by its result, the missing one by a synthetic one. Nothing
// stored changes.
func TestPromptRepairsDanglingToolCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	q1, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Content: "research two things", Visible: true})
	meta := func(m string) []byte { return []byte(fmt.Sprintf(`{"reply_to":%d,"run_id":1,%s}`, q1.ID, m)) }
	if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "assistant", Source: "agent",
		Metadata: meta(`"tool_calls":[{"id":"c1","name":"delegate","arguments":"{}"},{"id":"c2","name":"delegate","arguments":"{}"}]`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "tool", Source: "agent", Content: "first result",
		Metadata: meta(`"tool_call_id":"c2","tool_name":"delegate"`)}); err != nil {
		t.Fatal(err)
	}
	q2, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Content: "next question", Visible: true})
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 16000, ScopedRead: true})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: q2.ID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, msg := range p.Request.Messages {
		got = append(got, fmt.Sprintf("%s:%s:%s", msg.Role, msg.ToolCallID, withoutHeader(msg.Content)))
	}
	want := []string{"user::research two things", "assistant::", "tool:c2:first result", "tool:c1:" + prompt.OpenCallNote, "user::next question"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("prompt messages:\n%v\nwant\n%v", got, want)
	}
	if p.Request.Messages[3].Role != llm.RoleTool || !p.Request.Messages[3].IsError {
		t.Fatalf("synthetic result: %+v", p.Request.Messages[3])
	}
}
