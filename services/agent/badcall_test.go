package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestMalformedToolCallsComeBackToTheModel: arguments that are not JSON,
// an unknown tool and arguments that fail the schema each come back to the
// model as a tool result naming the problem; the model corrects itself
// and the run answers. Every later request the strict fake model receives
// is valid (its tool-call rules hold), so the history it carries is too.
func TestMalformedToolCallsComeBackToTheModel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(
		llmtest.Call("write_file", `{"path": "a.txt", "content": "hi`), // cut off: not JSON
		llmtest.Call("no_such_tool", `{}`),
		llmtest.Call("write_file", `{"path":"a.txt","content":"hi"}`),
		llmtest.Call("write_file", `{"path": 7}`), // fails the schema
		llmtest.Text("Written."),
	)
	q := b.say(t, "write hi to a.txt")
	msgs := b.waitVisible(t, 2)
	if msgs[1].Content != "Written." {
		t.Fatalf("answer: %+v", msgs[1])
	}
	if run := b.runOf(t, q.ID); run.Status != services.RunOK {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	reqs := b.model.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d model requests, want 5", len(reqs))
	}
	for i, want := range []string{"not a JSON object", "TOOL_UNKNOWN", `"path":"a.txt"`, "TOOL_BAD_ARGUMENTS"} {
		if r := reqs[i+1]; !r.LastIsToolResult || !strings.Contains(r.LastMessage, want) {
			t.Errorf("request %d: last message %q, want a tool result with %s", i+2, r.LastMessage, want)
		}
	}
	// The history sent back carries valid JSON arguments for every call.
	var body struct {
		Messages []struct {
			ToolCalls []struct {
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[4].Body, &body); err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, m := range body.Messages {
		for _, c := range m.ToolCalls {
			calls++
			if !json.Valid([]byte(c.Function.Arguments)) {
				t.Errorf("history carries arguments that are not JSON: %q", c.Function.Arguments)
			}
		}
	}
	if calls != 4 {
		t.Errorf("history carries %d tool calls, want 4", calls)
	}
}

// TestRepeatedBadCallsEndTheRun: three malformed calls in a row (a good
// one between resets the count: see the test above) end the
// run with an error that says so, instead of looping to the step limit.
func TestRepeatedBadCallsEndTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxSteps: 20})
	b.model.Enqueue(
		llmtest.Call("write_file", `not json`),
		llmtest.Call("nope", `{}`),
		llmtest.Call("write_file", `{"oops"`),
		llmtest.Text("never asked"),
	)
	q := b.say(t, "go")
	msgs := b.waitVisible(t, 2)
	if msgs[1].Source != "system" || !strings.Contains(msgs[1].Content, "3 malformed tool calls in a row") {
		t.Fatalf("notice: %+v", msgs[1])
	}
	if run := b.runOf(t, q.ID); run.Status != services.RunError {
		t.Fatalf("run %s", run.Status)
	}
	if n := b.model.RequestCount(); n != 3 {
		t.Fatalf("%d model requests, want 3", n)
	}
}
