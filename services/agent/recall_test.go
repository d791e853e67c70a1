package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/prompt"
)

// waitRunEnd waits until the main run answering message id has ended.
func (b *bundle) waitRunEnd(t *testing.T, id int64) services.Run {
	t.Helper()
	var ended services.Run
	var err error
	poll(waitLong, func() bool {
		var runs []services.Run
		if runs, err = b.store.ListRuns(context.Background(), services.RunQuery{TimelineScope: "global", Limit: 10}); err != nil {
			return true
		}
		for _, r := range runs {
			if r.TriggerMessageID == id && r.ParentRunID == 0 && r.FinishedAt != nil {
				ended = r
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if ended.ID != 0 {
		return ended
	}
	t.Fatalf("the run answering message %d did not end\n%s", id, b.diagnose())
	return services.Run{}
}

type recallIndexOut struct {
	Match   string `json:"match"`
	Budget  int    `json:"budget_tokens"`
	Results []struct {
		ID     string `json:"id"`
		Role   string `json:"role"`
		Tokens int    `json:"tokens"`
		Text   string `json:"text"`
	} `json:"results"`
}

type recallDetailOut struct {
	Budget int `json:"budget_tokens"`
	Items  []struct {
		ID   string `json:"id"`
		Text string `json:"text"`
		Cut  string `json:"cut"`
	} `json:"items"`
	Skipped []string `json:"skipped"`
	Missing []string `json:"missing"`
}

var vaultCode = regexp.MustCompile(`vault code is ([0-9A-Z-]+)`)

// TestRecallFindsAFactFromTurn3After500Turns: a 500-turn conversation with
// a 4,400-token window, compacted many times (the summaries do not keep the
// fact); at turn 500 the agent (a scripted model) finds what the owner said
// at turn 3 with recall_search then recall_detail, each answer within its
// budget. What main recalls is main's own rows: never the row of another
// timeline or a sub-agent's step that hold the same words.
func TestRecallFindsAFactFromTurn3After500Turns(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{window: 4400, keepTurns: 3, flags: scopedOn})
	ctx := context.Background()
	tok := prompt.NewLazyTokenizer("gpt-4o-mini", nil)
	var detailSeen, searchSeen string
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case isSummaryCall(r):
			return llmtest.Text(validSummary)
		case isChildCall(r):
			return llmtest.Text("checked the spare safe: empty")
		case r.LastIsToolResult && strings.Contains(r.LastMessage, `"budget_tokens"`) && strings.Contains(r.LastMessage, `"results"`):
			searchSeen = r.LastMessage
			var idx recallIndexOut
			_ = json.Unmarshal([]byte(r.LastMessage), &idx)
			for _, h := range idx.Results {
				if h.Role == "user" && !strings.Contains(h.Text, "What was") {
					return llmtest.Call("recall_detail", fmt.Sprintf(`{"ids":[%q]}`, h.ID))
				}
			}
			return llmtest.Text("I cannot find it.")
		case r.LastIsToolResult && strings.Contains(r.LastMessage, `"items"`):
			detailSeen = r.LastMessage
			if m := vaultCode.FindStringSubmatch(r.LastMessage); m != nil {
				return llmtest.Text("The vault code you gave me is " + m[1] + ".")
			}
			return llmtest.Text("The archive does not say.")
		case r.LastIsToolResult:
			return llmtest.Text("The sub-agent reported back.")
		case strings.Contains(r.LastMessage, "What was the vault code"):
			return llmtest.Call("recall_search", `{"query":"vault code"}`)
		case strings.Contains(r.LastMessage, "spare safe"):
			return delegateCalls("Check the spare safe; its vault code is 0000-CHILDSTEP.")
		}
		return llmtest.Text("Noted. " + strings.Repeat("Here is a reply about the weather and travel plans. ", 6))
	})
	// Rows with the same words that main must never recall.
	if _, _, err := b.store.InsertMessage(ctx, services.NewMessage{TimelineScope: "tg:5", Role: "user", Source: "telegram", Visible: true,
		Content: "my vault code is 0000-OTHERTIMELINE"}); err != nil {
		t.Fatal(err)
	}

	const turns = 500
	filler := strings.Repeat("some long question about plans, trains and the weather ", 6)
	var last services.Message
	for i := 1; i <= turns; i++ {
		text := fmt.Sprintf("turn %d: %s", i, filler)
		switch i {
		case 3:
			text = "Please keep this: the vault code is 7319-KESTREL."
		case 40:
			text = "Have a sub-agent look at the spare safe."
		case turns:
			text = "What was the vault code I told you at the very start?"
		}
		last = b.say(t, text)
		if r := b.waitRunEnd(t, last.ID); r.Status != services.RunOK {
			t.Fatalf("turn %d: run %s %s", i, r.Status, r.Error)
		}
	}

	// Compacted several times; the fact is in no summary and not in the
	// prompt of the last question.
	segs, err := b.store.ListSegments(ctx, "global", "main")
	if err != nil || len(segs) < 5 {
		t.Fatalf("%d segments (%v), want many compactions", len(segs), err)
	}
	for _, r := range b.model.Requests() {
		if r.LastMessage == last.Content && strings.Contains(string(r.Body), "KESTREL") {
			t.Fatalf("the fact was still in the prompt of the last question; nothing to recall")
		}
	}
	page, _ := b.chat.Timeline(ctx, "global", 0, 0, 5)
	answer := page.Messages[len(page.Messages)-1]
	if answer.Content != "The vault code you gave me is 7319-KESTREL." {
		t.Fatalf("last answer %q\nsearch: %s\ndetail: %s", answer.Content, searchSeen, detailSeen)
	}

	// Each step stayed within its budget.
	var idx recallIndexOut
	var det recallDetailOut
	if err := json.Unmarshal([]byte(searchSeen), &idx); err != nil || idx.Match != "all words" || len(idx.Results) == 0 {
		t.Fatalf("search result: %s", searchSeen)
	}
	if n := tok.Count(searchSeen); n > idx.Budget {
		t.Fatalf("recall_search answered %d tokens, budget %d", n, idx.Budget)
	}
	if err := json.Unmarshal([]byte(detailSeen), &det); err != nil || len(det.Items) != 1 || det.Items[0].Cut != "" {
		t.Fatalf("detail result: %s", detailSeen)
	}
	if n := tok.Count(detailSeen); n > det.Budget {
		t.Fatalf("recall_detail answered %d tokens, budget %d", n, det.Budget)
	}
	// The whole index entry said what the detail costs.
	for _, h := range idx.Results {
		if h.ID == det.Items[0].ID && h.Tokens != tok.Count(det.Items[0].Text) {
			t.Fatalf("index said %d tokens for %s, the text is %d", h.Tokens, h.ID, tok.Count(det.Items[0].Text))
		}
	}
	run := b.runOf(t, last.ID)
	if run.EstimatedPromptTokens > run.PromptTokenBudget {
		t.Fatalf("the last prompt %d over its budget %d", run.EstimatedPromptTokens, run.PromptTokenBudget)
	}

	// Every id main was shown is a main row of this timeline, though the
	// child's scope and the other timeline hold the same words.
	for _, h := range idx.Results {
		kind, id, err := services.ParseRecallRef(h.ID)
		if err != nil {
			t.Fatal(err)
		}
		if kind != services.RecallMessage {
			continue
		}
		if id >= last.ID {
			t.Fatalf("recall_search returned %s, the question being answered or later", h.ID)
		}
		m, err := b.store.GetMessage(ctx, id)
		if err != nil || m.TimelineScope != "global" || m.ContextScope != "main" {
			t.Fatalf("main recalled %s: %+v %v", h.ID, m, err)
		}
	}
	kids, _ := b.store.ListRuns(ctx, services.RunQuery{TimelineScope: "global", Limit: 1000})
	var child services.Run
	for _, k := range kids {
		if k.ParentRunID != 0 {
			child = k
		}
	}
	if child.ID == 0 {
		t.Fatal("no sub-agent ran")
	}
	view := services.NewRecallView("global", child.ContextScope, "main")
	hits, err := b.store.SearchRecall(ctx, services.RecallQuery{View: view, Terms: []string{"childstep"}, Limit: 10})
	if err != nil || len(hits) == 0 {
		t.Fatalf("the child's own step is not found from its scope: %v %v", hits, err)
	}
	for _, term := range []string{"childstep", "othertimeline"} {
		hits, err := b.store.SearchRecall(ctx, services.RecallQuery{View: services.NewRecallView("global", "main", "main"), Terms: []string{term}, Limit: 10})
		if err != nil || len(hits) != 0 {
			t.Fatalf("main recalls %q: %+v %v", term, hits, err)
		}
	}
}
