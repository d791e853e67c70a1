package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// childPayload decodes the task payload of a child's model request.
func childPayload(t *testing.T, r llmtest.Request) agent.TaskPayload {
	t.Helper()
	for _, m := range openAIMessages(t, r) {
		text, _ := m["content"].(string)
		body := services.StripInputHeader(text)
		if m["role"] == "user" && strings.HasPrefix(body, "Task payload (JSON):\n") {
			// Like any input, the task starts with its date and where it came from.
			if body == text || !strings.Contains(text, "This message came through the main agent") {
				t.Errorf("the task has no date and channel line: %.200q", text)
			}
			text = body
			var p agent.TaskPayload
			if err := json.Unmarshal([]byte(strings.TrimPrefix(text, "Task payload (JSON):\n")), &p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("no task payload in the child's request: %s", r.Body)
	return agent.TaskPayload{}
}

// TestChildPromptCarriesRulesSettingsAndObservations: a sub-agent's prompt
// carries the rules file's text, the hard and soft constraints, the
// remembered settings, and observations recalled from main (an earlier
// message and an earlier child's handoff) with their source ids and scores;
// nothing of another timeline.
func TestChildPromptCarriesRulesSettingsAndObservations(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: scopedOn})
	ctx := context.Background()
	ws := filepath.Join(b.ws, "global")
	_ = os.MkdirAll(ws, 0o700)
	rules := "# House rules\n\nNever restart a server on Fridays.\nWrite every log in UTC."
	if err := os.WriteFile(filepath.Join(ws, "RULES.md"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []services.Constraint{{Text: "Never delete backups.", Hard: true}, {Text: "Prefer short reports.", Hard: false}} {
		c.TimelineScope = "global"
		if _, err := b.store.CreateConstraint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.store.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: "timezone", Value: "Europe/Paris", Confidence: 0.9}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.InsertMessage(ctx, services.NewMessage{TimelineScope: "tg:3", Role: "user", Source: "telegram", Visible: true,
		Content: "the staging server heron is mine"}); err != nil {
		t.Fatal(err)
	}
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case isChildCall(r) && strings.Contains(string(r.Body), "disk"):
			return llmtest.Text("Disk of heron is 91% full.\nThe logs folder takes most of it.")
		case isChildCall(r):
			return llmtest.Text("heron is up")
		case r.LastIsToolResult:
			return llmtest.Text("Done.")
		case strings.Contains(r.LastMessage, "disk"):
			return delegateCalls("Check the disk of the staging server heron.")
		case strings.Contains(r.LastMessage, "restart"):
			return delegateCalls("Plan a restart of the staging server heron.")
		}
		return llmtest.Text("Noted.")
	})
	first := b.say(t, "Our staging server is called heron; it runs the billing jobs.")
	b.waitRunEnd(t, first.ID)
	q := b.say(t, "Please check the disk of heron.")
	b.waitRunEnd(t, q.ID)
	q = b.say(t, "Now plan the restart of heron.")
	b.waitRunEnd(t, q.ID)

	var p agent.TaskPayload
	for _, r := range b.model.Requests() {
		if isChildCall(r) && strings.Contains(string(r.Body), "Plan a restart") {
			p = childPayload(t, r)
		}
	}
	if p.Version != 2 || p.Task != "Plan a restart of the staging server heron." {
		t.Fatalf("payload: %+v", p)
	}
	if len(p.RulesFiles) != 1 || p.RulesFiles[0].Name != "RULES.md" || p.RulesFiles[0].Text != rules {
		t.Fatalf("rules file: %+v", p.RulesFiles)
	}
	if strings.Join(p.Constraints.Hard, "|") != "Never delete backups." || strings.Join(p.Constraints.Soft, "|") != "Prefer short reports." {
		t.Fatalf("constraints: %+v", p.Constraints)
	}
	if len(p.Settings) != 1 || p.Settings[0].Key != "timezone" || p.Settings[0].Value != "Europe/Paris" {
		t.Fatalf("settings: %+v", p.Settings)
	}
	kinds := map[string]agent.Observation{}
	for _, o := range p.Observations {
		kind, id, err := services.ParseRecallRef(o.Source)
		if err != nil || o.Score <= 0 {
			t.Fatalf("observation %+v: %v", o, err)
		}
		if kind == services.RecallMessage {
			m, err := b.store.GetMessage(ctx, id)
			if err != nil || m.TimelineScope != "global" || m.ContextScope != "main" {
				t.Fatalf("observation %s is not main's: %+v %v", o.Source, m, err)
			}
		}
		kinds[o.Kind] = o
		if strings.Contains(o.Text, "is mine") {
			t.Fatalf("another timeline's row observed: %+v", o)
		}
	}
	if o, ok := kinds["message"]; !ok || !strings.Contains(o.Text, "heron") {
		t.Fatalf("no earlier message observed: %+v", p.Observations)
	}
	if o, ok := kinds["handoff"]; !ok || !strings.Contains(o.Text, "91% full") {
		t.Fatalf("the earlier child's handoff is not observed: %+v", p.Observations)
	}
	if len(p.Downgrade) != 0 || p.Budget.PayloadTokens != 8000 {
		t.Fatalf("budget %+v downgrade %+v", p.Budget, p.Downgrade)
	}
}
