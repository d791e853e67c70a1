package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

const validSummary = `## Archived Session Summary
### Objectives & Status
The owner is chatting about topics.
### Technical Context
None.
### Completed Milestones
Several turns answered.
### Key Insights & Decisions
None.
### File System State
No files.`

func isSummaryCall(r llmtest.Request) bool {
	return strings.Contains(string(r.Body), "You write faithful, compact summaries")
}

// openAIMessages decodes the messages of a recorded chat completions request.
func openAIMessages(t *testing.T, r llmtest.Request) []map[string]any {
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Messages
}

// TestLongConversationCompacts drives a conversation far past the window:
// compaction runs several times, every message stays stored, every prompt
// stays within its budget, and no tool call is separated from its result.
func TestLongConversationCompacts(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{window: 4400, keepTurns: 3, flags: services.Flags{ScopedWrite: true, ScopedRead: true}})
	var turnNo atomic.Int64
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			return llmtest.Text(validSummary)
		}
		if r.LastIsToolResult {
			return llmtest.Text("noted the file")
		}
		n := turnNo.Add(1)
		if n%7 == 0 { // now and then a tool round trip
			return llmtest.Call("write_file", fmt.Sprintf(`{"path":"n%d.txt","content":"x"}`, n))
		}
		return llmtest.Text("answer " + strings.Repeat("words and more words ", 20))
	})
	const turns = 40
	filler := strings.Repeat("some long question text ", 25)
	for i := 0; i < turns; i++ {
		b.say(t, fmt.Sprintf("q%d %s", i, filler))
		b.waitVisible(t, 2*(i+1))
	}
	ctx := context.Background()
	// Every message is still stored.
	all, _ := b.store.ListTimeline(ctx, services.TimelineQuery{TimelineScope: "global", Limit: 1000})
	if len(all) != 2*turns {
		t.Fatalf("visible rows %d, want %d", len(all), 2*turns)
	}
	for _, scope := range []string{"main", "global"} {
		segs, err := b.store.ListSegments(ctx, "global", scope)
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) < 2 {
			t.Fatalf("scope %s: %d segments after %d turns, want several compactions", scope, len(segs), turns)
		}
		for i := 1; i < len(segs); i++ {
			if segs[i].FromMessageID <= segs[i-1].UntilMessageID {
				t.Fatalf("scope %s: segments overlap: %+v then %+v", scope, segs[i-1], segs[i])
			}
		}
	}
	gsum, _ := b.store.GetSummary(ctx, "global", "global")
	msum, _ := b.store.GetSummary(ctx, "global", "main")
	if gsum.UntilMessageID == 0 || msum.UntilMessageID == 0 {
		t.Fatalf("cursors did not move: global %d main %d", gsum.UntilMessageID, msum.UntilMessageID)
	}
	// Every run stayed within its budget.
	runs, _ := b.store.ListRuns(ctx, services.RunQuery{TimelineScope: "global", Limit: 1000})
	for _, r := range runs {
		if r.Status != services.RunOK {
			t.Fatalf("run %d: %s %s", r.ID, r.Status, r.Error)
		}
		if r.EstimatedPromptTokens > r.PromptTokenBudget {
			t.Fatalf("run %d: prompt %d over budget %d", r.ID, r.EstimatedPromptTokens, r.PromptTokenBudget)
		}
	}
	// In every request a tool message follows the assistant call it answers.
	for _, r := range b.model.Requests() {
		if isSummaryCall(r) {
			continue
		}
		msgs := openAIMessages(t, r)
		calls := map[string]bool{}
		for _, m := range msgs {
			if tc, ok := m["tool_calls"].([]any); ok {
				for _, c := range tc {
					calls[c.(map[string]any)["id"].(string)] = true
				}
			}
			if m["role"] == "tool" && !calls[m["tool_call_id"].(string)] {
				t.Fatalf("tool result without its call in a prompt")
			}
		}
		// The first user message of a prompt is a whole turn's start or the summary.
	}
}

// TestBadSummaryMovesNothing: an empty summary moves nothing and the owner
// is told; a summary that ignores the template (a weak model) is kept as
// written, under the template's title, instead of failing forever.
func TestBadSummaryMovesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{keepTurns: 1})
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			return llmtest.Text("   ")
		}
		return llmtest.Text("fine")
	})
	for i := 0; i < 4; i++ {
		b.say(t, fmt.Sprint("message ", i))
		b.waitVisible(t, 2*(i+1))
	}
	b.say(t, "/compact keep the names")
	msgs := b.waitVisible(t, 10)
	last := msgs[len(msgs)-1]
	if !strings.Contains(last.Content, "Compaction failed, nothing was moved") || !strings.Contains(last.Content, "empty") {
		t.Fatalf("notice: %q", last.Content)
	}
	if sum, err := b.store.GetSummary(context.Background(), "global", "global"); err == nil && sum.UntilMessageID != 0 {
		t.Fatalf("cursor moved on an empty summary: %+v", sum)
	}
	// A free-form summary is kept as written.
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			return llmtest.Text("just some prose without the template about messages 0 to 2")
		}
		return llmtest.Text("fine")
	})
	b.say(t, "/compact")
	msgs = b.waitVisible(t, 12)
	if n := msgs[len(msgs)-1].Content; !strings.Contains(n, "archived") || !strings.Contains(n, "kept as written") {
		t.Fatalf("notice after a free-form summary: %q", n)
	}
	sum, err := b.store.GetSummary(context.Background(), "global", "global")
	if err != nil || sum.UntilMessageID == 0 || !strings.Contains(sum.SummaryText, "## Archived Session Summary\n\njust some prose") {
		t.Fatalf("free-form summary: %+v %v", sum, err)
	}
	firstCursor := sum.UntilMessageID
	for i := 4; i < 7; i++ {
		b.say(t, fmt.Sprint("message ", i))
		b.waitVisible(t, 12+2*(i-3))
	}
	// A good summary then moves it, with the focus passed to the model.
	b.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if isSummaryCall(r) {
			return llmtest.Text(validSummary)
		}
		return llmtest.Text("fine")
	})
	b.say(t, "/compact keep the names")
	msgs = b.waitVisible(t, 20)
	if !strings.Contains(msgs[len(msgs)-1].Content, "archived") {
		t.Fatalf("notice: %q", msgs[len(msgs)-1].Content)
	}
	sum, err = b.store.GetSummary(context.Background(), "global", "global")
	if err != nil || sum.UntilMessageID <= firstCursor || !strings.Contains(sum.SummaryText, "Objectives") {
		t.Fatalf("cursor: %+v %v", sum, err)
	}
	var sawFocus bool
	for _, r := range b.model.Requests() {
		sawFocus = sawFocus || (isSummaryCall(r) && strings.Contains(string(r.Body), "keep the names"))
	}
	if !sawFocus {
		t.Fatal("the /compact focus did not reach the summary call")
	}
	// The next prompt starts with the summary and keeps the last turn.
	b.say(t, "and now?")
	b.waitVisible(t, 22)
	reqs := b.model.Requests()
	body := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(body, "Summary of the earlier conversation") || strings.Contains(body, "message 0") {
		t.Fatalf("prompt after compaction: %s", body)
	}
}

func TestRulesSettingsReferencesAndReminders(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	ws := filepath.Join(b.ws, "global")
	_ = os.MkdirAll(ws, 0o700)
	_ = os.WriteFile(filepath.Join(ws, "Rules.MD"), []byte("Never delete files."), 0o600)
	_ = os.WriteFile(filepath.Join(ws, "guide.md"), []byte("# Guide\nline two\nline three\n## Setup\nrun make\n"), 0o600)
	if _, err := b.store.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: "Answer in English.", Hard: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.CreateConstraint(ctx, services.Constraint{TimelineScope: "tg:9", Text: "SECRET RULE OF ANOTHER USER", Hard: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: "name", Value: "Ada", Confidence: 0.9}); err != nil {
		t.Fatal(err)
	}
	b.model.Enqueue(llmtest.Call("remember", `{"key":"Timezone","value":"Europe/Paris","confidence":0.8}`), llmtest.Text("ok"), llmtest.Text("ok again"))
	b.say(t, "see [guide.md:2:3] and [guide.md#Setup], also check @notes/todo.md please")
	b.waitVisible(t, 2)
	reqs := b.model.Requests()
	body := string(reqs[0].Body)
	for _, want := range []string{"Never delete files.", "[hard] Answer in English.", "name: Ada", "line two\\nline three", "run make", "notes/todo.md"} {
		if !strings.Contains(body, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if strings.Contains(body, "SECRET RULE") {
		t.Fatal("another timeline's rule entered the prompt")
	}
	// The remember tool stored the setting; the next prompt carries it.
	b.say(t, "thanks")
	b.waitVisible(t, 4)
	body = string(b.model.Requests()[2].Body)
	if !strings.Contains(body, "timezone: Europe/Paris") {
		t.Fatalf("remembered setting missing: %s", body)
	}
	// The stable prefix did not change between the two turns' first calls.
	runs, _ := b.store.ListRuns(ctx, services.RunQuery{TimelineScope: "global", Limit: 10})
	var hashes []string
	for _, r := range runs {
		steps, _ := b.store.ListSteps(ctx, r.ID)
		var ins struct {
			PrefixHash string `json:"prefix_hash"`
		}
		_ = json.Unmarshal(steps[0].Payload, &ins)
		hashes = append(hashes, ins.PrefixHash)
	}
	if len(hashes) != 2 || hashes[0] == hashes[1] {
		// The setting was added between the turns: the prefix must differ.
		t.Fatalf("prefix hashes %v: a new setting must change the stable prefix", hashes)
	}
}

func TestInputTooLargeStoresNothingHalfway(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{window: 2000})
	q := b.say(t, strings.Repeat("enormous ", 3000))
	msgs := b.waitVisible(t, 2)
	if !strings.Contains(msgs[1].Content, "too long") {
		t.Fatalf("notice: %q", msgs[1].Content)
	}
	run := b.runOf(t, q.ID)
	if run.Status != services.RunError || b.model.RequestCount() != 0 {
		t.Fatalf("run %s, %d model calls", run.Status, b.model.RequestCount())
	}
	all, _ := b.store.ListTimeline(context.Background(), services.TimelineQuery{TimelineScope: "global", IncludeHidden: true})
	if len(all) != 2 {
		t.Fatalf("rows stored: %d (want the message and the notice only)", len(all))
	}
}
