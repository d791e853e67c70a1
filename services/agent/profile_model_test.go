package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestProfileWithAModelOfItsOwnCallsThatModel: a sub-agent profile naming
// a model other than the main one gets a provider of its own (same server
// and key), and a task delegated to it asks that model; main keeps its own.
func TestProfileWithAModelOfItsOwnCallsThatModel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: scopedOn, configure: func(o *app.Config) {
		o.Agent.Profiles = map[string]agent.Profile{"researcher": {SystemPrompt: "Find facts.", Model: "small-model"}}
	}})
	researcher := func(r llmtest.Request) bool { return strings.Contains(string(r.Body), "Find facts.") }
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case researcher(r):
			return llmtest.Text("found it")
		case r.LastIsToolResult:
			return llmtest.Text("done")
		}
		args, _ := json.Marshal(map[string]string{"task": "look it up", "agent_id": "researcher"})
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "delegate", Arguments: string(args)}}}
	})
	b.say(t, "research this")
	b.waitAnswers(t, 1)
	models := map[bool]map[string]bool{true: {}, false: {}}
	for _, r := range b.model.Requests() {
		models[researcher(r)][r.Model] = true
	}
	if len(models[true]) != 1 || !models[true]["small-model"] || len(models[false]) != 1 || !models[false]["gpt-4o-mini"] {
		t.Fatalf("models asked: by the child %v, by main %v; want small-model and gpt-4o-mini", models[true], models[false])
	}
}
