package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

// TestPromptRetrievesArchivedHandoffsThroughTheStore: the prompt manager
// the app builds is given the store as its archive (prompt's Recall), so
// a main prompt on the scoped read path brings back a sub-agent's handoff
// whose turn was archived when the input shares its words.
func TestPromptRetrievesArchivedHandoffsThroughTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := apptest.Start(t, apptest.Options{Flags: services.Flags{ScopedWrite: true, ScopedRead: true}})
	st := in.App.Store()
	insert := func(m services.NewMessage) int64 {
		t.Helper()
		m.TimelineScope, m.ContextScope = "global", services.MainScope
		row, _, err := st.InsertMessage(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return row.ID
	}
	first := insert(services.NewMessage{Role: services.RoleUser, Source: services.SourceWeb, Visible: true, Content: "look into the export"})
	body, _ := json.Marshal(map[string]any{"version": 1, "kind": "handoff", "run_id": 7, "agent_id": "researcher",
		"mode": "subagent", "status": "ok", "summary": "The billing export writes CSV with semicolons."})
	insert(services.NewMessage{Role: services.RoleTool, Source: services.SourceAgent, Content: string(body),
		Metadata: services.MessageMeta{Kind: services.MetaHandoff, ChildRunID: 7, ToolName: "delegate"}.Encode()})
	until := insert(services.NewMessage{Role: services.RoleAssistant, Source: services.SourceAgent, Visible: true, Content: "Done."})
	if _, err := st.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: services.MainScope, FromMessageID: first,
		UntilMessageID: until, SummaryText: "## Archived Session Summary\nEarlier talk.", TokenCount: 8}); err != nil {
		t.Fatal(err)
	}
	q := insert(services.NewMessage{Role: services.RoleUser, Source: services.SourceWeb, Visible: true, Content: "How does the billing export work?"})
	p, err := in.App.Context().Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: services.MainScope, TriggerID: q})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range p.Request.Messages {
		if strings.HasPrefix(msg.Content, "## Retrieved for this turn") && strings.Contains(msg.Content, "semicolons") {
			return
		}
	}
	t.Fatalf("no archived handoff in the retrieved layer of %d messages", len(p.Request.Messages))
}
