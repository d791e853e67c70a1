package agent_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// mainRequests are the fake model's requests that are not a delegated
// task's (a child's or an inline task's), in order.
func mainRequests(b *bundle) []llmtest.Request {
	var out []llmtest.Request
	for _, r := range b.model.Requests() {
		if !isChildCall(r) && !strings.Contains(string(r.Body), "Task payload") {
			out = append(out, r)
		}
	}
	return out
}

// TestHandoffResultLeavesMainHistoryAfterItsTurn: a sub-agent's whole
// result serves the turn that delegated; later main prompts keep its
// summary and recall id only (no result, no usage), and recall_detail
// brings the result back whole by that id.
func TestHandoffResultLeavesMainHistoryAfterItsTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: scopedOn})
	b.model.SetDefault(delegating("check the disk of heron",
		"The server heron is 91% full.\nDetails: the logs folder holds 40 GB; rotation stopped on 2026-02-11.", "Heron's disk is nearly full."))
	q1 := b.say(t, "how full is heron's disk?")
	b.waitRunEnd(t, q1.ID)
	kids := childRuns(t, b, b.runOf(t, q1.ID).ID)
	if len(kids) != 1 {
		t.Fatalf("%d child runs", len(kids))
	}
	ref := fmt.Sprintf("h%d", kids[0].ID)
	turn1 := mainRequests(b)
	if len(turn1) != 2 || !strings.Contains(turn1[1].LastMessage, "rotation stopped") {
		t.Fatalf("the delegating turn did not read the whole result: %+v", turn1)
	}

	// The next turn asks for the details again; the model reads them back.
	b.model.Enqueue(
		llmtest.Call("recall_detail", fmt.Sprintf(`{"ids":[%q,"h999999"]}`, ref)),
		llmtest.Text("Rotation stopped on 2026-02-11."),
	)
	q2 := b.say(t, "since when is it filling up?")
	b.waitRunEnd(t, q2.ID)
	turn2 := mainRequests(b)[2:]
	if len(turn2) != 2 {
		t.Fatalf("%d main requests in turn 2", len(turn2))
	}
	first := string(turn2[0].Body)
	if strings.Contains(first, "rotation stopped") || strings.Contains(first, `\"usage\"`) {
		t.Fatalf("a later prompt carries the handoff's result or bookkeeping: %s", first)
	}
	if !strings.Contains(first, "The server heron is 91% full.") || !strings.Contains(first, `\"recall_id\":\"`+ref+`\"`) {
		t.Fatalf("a later prompt lacks the handoff's summary or recall id %s: %s", ref, first)
	}
	var got recallDetailOut
	if err := json.Unmarshal([]byte(turn2[1].LastMessage), &got); err != nil {
		t.Fatalf("recall_detail result %q: %v", turn2[1].LastMessage, err)
	}
	if len(got.Items) != 1 || !strings.Contains(got.Items[0].Text, "rotation stopped on 2026-02-11") ||
		len(got.Missing) != 1 || got.Missing[0] != "h999999" {
		t.Fatalf("recall_detail by the handoff's id: %s", turn2[1].LastMessage)
	}
}

// TestHandoffLeavesOutAResultThatIsItsSummary: a one-line answer is the
// handoff's summary; it is not sent a second time as its result.
func TestHandoffLeavesOutAResultThatIsItsSummary(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: scopedOn})
	b.model.SetDefault(delegating("look around", "Nothing to report.", "Done."))
	q := b.say(t, "anything new?")
	b.waitRunEnd(t, q.ID)
	reqs := mainRequests(b)
	var h struct {
		Summary  string  `json:"summary"`
		Result   *string `json:"result"`
		RecallID string  `json:"recall_id"`
	}
	if err := json.Unmarshal([]byte(reqs[len(reqs)-1].LastMessage), &h); err != nil {
		t.Fatal(err)
	}
	if h.Summary != "Nothing to report." || h.Result != nil || !strings.HasPrefix(h.RecallID, "h") {
		t.Fatalf("handoff: %s", reqs[len(reqs)-1].LastMessage)
	}
}

// TestInlineHandoffHistoryKeepsItsResult: inline (AGENT_SUBAGENTS=0) a
// delegated task's handoff has no recall id, so later prompts keep its
// result (cut to the rule's bound), never its transcript or usage.
func TestInlineHandoffHistoryKeepsItsResult(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{flags: services.Flags{ScopedWrite: true, ScopedRead: true}})
	ws := filepath.Join(b.ws, "global")
	_ = os.MkdirAll(ws, 0o700)
	_ = os.WriteFile(filepath.Join(ws, "disk.md"), []byte("RAW FILE TEXT of heron"), 0o600)
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case strings.Contains(string(r.Body), "Task payload") && !r.LastIsToolResult:
			return llmtest.Call("read_file", `{"path":"disk.md"}`)
		case strings.Contains(string(r.Body), "Task payload"):
			return llmtest.Text("Heron is 91% full.\nDetails: rotation stopped on 2026-02-11.")
		case r.LastIsToolResult:
			return llmtest.Text("Heron's disk is nearly full.")
		}
		return delegateCalls("check the disk of heron")
	})
	for i, text := range []string{"how full is heron's disk?", "thanks"} {
		q := b.say(t, text)
		b.waitRunEnd(t, q.ID)
		if i == 0 {
			b.model.SetDefault(llmtest.Echo)
		}
	}
	reqs := mainRequests(b)
	if !strings.Contains(reqs[1].LastMessage, "RAW FILE TEXT") {
		t.Fatalf("the inline task's turn lacks its transcript: %s", reqs[1].LastMessage)
	}
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "rotation stopped") || strings.Contains(last, "RAW FILE TEXT") || strings.Contains(last, `\"usage\"`) {
		t.Fatalf("the inline handoff's history form: %s", last)
	}
}
