package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
)

// TestRuleCommandsAreAudited: /rules add and /rules remove each write an
// audit row naming the owner, the channel and the rule; a command that
// fails writes none.
func TestRuleCommandsAreAudited(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	post := func(text string) {
		if _, _, err := b.chat.Post(ctx, services.PostParams{TimelineScope: "global", Source: services.SourceTUI, Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	post("/rules add Answer in French.")
	b.waitVisible(t, 2)
	cs, err := b.store.ListConstraints(ctx, "global")
	if err != nil || len(cs) != 1 {
		t.Fatalf("rules: %+v %v", cs, err)
	}
	post("/rules remove 999999")
	post(fmt.Sprintf("/rules remove %d", cs[0].ID))
	b.waitVisible(t, 6)
	rows, err := b.store.ListAudit(ctx, time.Time{}, 0)
	if err != nil || len(rows) != 2 {
		t.Fatalf("audit rows: %+v %v", rows, err)
	}
	for i, status := range []string{"added", "removed"} {
		e := rows[i]
		if e.Action != services.AuditRuleChange || e.Status != status || e.Actor != "owner" || e.Channel != "tui" ||
			e.Subject != fmt.Sprintf("rule %d", cs[0].ID) || e.TimelineScope != "global" || !strings.Contains(string(e.Detail), "Answer in French.") {
			t.Fatalf("row %d: %+v %s", i, e, e.Detail)
		}
	}
}
