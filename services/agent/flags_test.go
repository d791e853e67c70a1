package agent_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// scriptedModel answers the flag-matrix conversation deterministically and
// records the main agent's request bodies (summary calls apart).
type scriptedModel struct {
	mu    sync.Mutex
	mains []string
}

func (s *scriptedModel) reply(r llmtest.Request) llmtest.Reply {
	body := string(r.Body)
	if isSummaryCall(r) {
		marker := "GLOBAL-SUMMARY"
		if strings.Contains(body, "Tool result:") {
			marker = "MAIN-SUMMARY"
		}
		return llmtest.Text(validSummary + "\nScope marker: " + marker)
	}
	s.mu.Lock()
	s.mains = append(s.mains, body)
	s.mu.Unlock()
	if r.LastIsToolResult {
		return llmtest.Text("saved it")
	}
	var n int
	fmt.Sscanf(r.LastMessage, "turn %d", &n)
	if n%3 == 1 {
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: fmt.Sprintf("call-turn-%d", n), Name: "write_file",
			Arguments: fmt.Sprintf(`{"path":"t%d.txt","content":"x"}`, n)}}}
	}
	return llmtest.Text(fmt.Sprintf("answer to turn %d", n))
}

func (s *scriptedModel) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.mains...)
}

// converse sends turns from..to (with /compact after turn 6) and waits for
// each answer.
func converse(t *testing.T, b *bundle, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		before, _ := b.chat.Timeline(context.Background(), "global", 0, 0, 500)
		b.say(t, fmt.Sprintf("turn %d: tell me something", i))
		b.waitVisible(t, len(before.Messages)+2)
		if i == 6 {
			b.say(t, "/compact")
			b.waitVisible(t, len(before.Messages)+4)
		}
	}
}

func TestFlagMatrix(t *testing.T) {
	t.Parallel()
	legacy := services.Flags{SubAgents: true}
	dual := services.Flags{ScopedWrite: true, SubAgents: true}
	run := func(flags services.Flags) (*bundle, *scriptedModel) {
		sm := &scriptedModel{}
		b := setup(t, setupOpts{flags: flags, keepTurns: 2})
		b.model.SetDefault(sm.reply)
		converse(t, b, 1, 9)
		b.park()
		return b, sm
	}
	bLegacy, mLegacy := run(legacy)
	bDual, mDual := run(dual)

	// 0/0 and 1/0 send byte-identical prompts.
	l, d := mLegacy.bodies(), mDual.bodies()
	if len(l) != len(d) {
		t.Fatalf("0/0 made %d main calls, 1/0 made %d", len(l), len(d))
	}
	// File times in tool results are the only thing that may differ.
	mtime := regexp.MustCompile(`mtime\\?":\\?"[^"\\]*`)
	for i := range l {
		l[i], d[i] = mtime.ReplaceAllString(l[i], "mtime"), mtime.ReplaceAllString(d[i], "mtime")
		if l[i] != d[i] {
			t.Fatalf("prompt %d differs between 0/0 and 1/0:\n%s\n---\n%s", i, l[i], d[i])
		}
	}
	// Every main prompt carries the (test clock's) date and time and the
	// channel of its input, once, in the current input.
	for i, body := range l {
		if strings.Count(body, "[Current date and time: Wednesday 2026-03-04 09:15 UTC (UTC). This message came through the web chat page.]") != 1 {
			t.Fatalf("prompt %d lacks the date, time and channel once: %s", i, body)
		}
	}
	ctx := context.Background()
	// 1/0 wrote summaries for global and main, with independent cursors;
	// 0/0 only for global.
	if _, err := bLegacy.store.GetSummary(ctx, "global", "main"); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("0/0 wrote a main summary: %v", err)
	}
	g, err1 := bDual.store.GetSummary(ctx, "global", "global")
	m, err2 := bDual.store.GetSummary(ctx, "global", "main")
	if err1 != nil || err2 != nil || !strings.Contains(g.SummaryText, "GLOBAL-SUMMARY") || !strings.Contains(m.SummaryText, "MAIN-SUMMARY") {
		t.Fatalf("1/0 summaries: %v %v %q %q", err1, err2, g.SummaryText, m.SummaryText)
	}
}

// TestFlagMatrixRollbackMidConversation: 1/1, then roll back to 1/0
// mid-conversation on the same database. (TestFlagMatrix's other half: the
// two run side by side.)
func TestFlagMatrixRollbackMidConversation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dual := services.Flags{ScopedWrite: true, SubAgents: true}
	scoped := services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true}
	dbURL := apptest.SchemaURL(t)
	sm := &scriptedModel{}
	model := llmtest.NewServer(t)
	model.SetDefault(sm.reply)
	b1 := setupOn(t, dbURL, model, setupOpts{flags: scoped, keepTurns: 2})
	converse(t, b1, 1, 8)
	mains := sm.bodies()
	if !strings.Contains(mains[len(mains)-1], "MAIN-SUMMARY") {
		t.Fatal("under 1/1 the main prompt must read the main summary")
	}
	b1.park()
	b2 := setupOn(t, dbURL, model, setupOpts{flags: dual, keepTurns: 2})
	converse(t, b2, 9, 10)
	mains = sm.bodies()
	last := mains[len(mains)-1]
	if !strings.Contains(last, "GLOBAL-SUMMARY") || strings.Contains(last, "MAIN-SUMMARY") {
		t.Fatalf("after rollback the main prompt must come from the global summary: %s", last)
	}
	// Nothing was lost: every question and answer of both phases is stored.
	page, _ := b2.chat.Timeline(ctx, "global", 0, 0, 500)
	var questions, answers int
	for _, msg := range page.Messages {
		if strings.HasPrefix(msg.Content, "turn ") {
			questions++
		}
		if msg.Role == "assistant" && msg.Source == "agent" {
			answers++
		}
	}
	if questions != 10 || answers != 10 {
		t.Fatalf("after rollback: %d questions, %d answers stored, want 10 and 10", questions, answers)
	}
}

// TestRollbackAfterGlobalStopped: with AGENT_CONTEXT_GLOBAL_WRITE=0 under
// 1/1 only the main summary is written; turning reads off again then reads
// the global summary as it was when it stopped (stale cursor), with every
// turn after that cursor as recent rows as far as the budget holds, and no
// main summary. Turning global writes back on catches the global cursor up
// at the next compaction (docs/ROLLOUT.md, "Retiring the global path").
func TestRollbackAfterGlobalStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := apptest.SchemaURL(t)
	sm := &scriptedModel{}
	model := llmtest.NewServer(t)
	model.SetDefault(sm.reply)
	dual := services.Flags{ScopedWrite: true, SubAgents: true}
	scopedNoGlobal := services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true, NoGlobalWrite: true}
	rollback := services.Flags{ScopedWrite: true, SubAgents: true, NoGlobalWrite: true}

	// 1/0 with both summaries written.
	b0 := setupOn(t, dbURL, model, setupOpts{flags: dual, keepTurns: 2})
	converse(t, b0, 1, 6) // /compact after turn 6
	b0.park()
	g0, err := b0.store.GetSummary(ctx, "global", "global")
	if err != nil || g0.UntilMessageID == 0 {
		t.Fatalf("no global summary under 1/0: %v", err)
	}
	// 1/1 with global writes stopped: /compact writes main only.
	b1 := setupOn(t, dbURL, model, setupOpts{flags: scopedNoGlobal, keepTurns: 2})
	summariesBefore := countSummaryCalls(model)
	visible, _ := b1.chat.Timeline(ctx, "global", 0, 0, 500)
	n := len(visible.Messages)
	for i := 7; i <= 12; i++ {
		b1.say(t, fmt.Sprintf("turn %d: tell me something", i))
		n += 2
		b1.waitVisible(t, n)
	}
	b1.say(t, "/compact")
	n += 2
	b1.waitVisible(t, n)
	b1.park()
	if got := countSummaryCalls(model) - summariesBefore; got != 1 {
		t.Fatalf("/compact with global stopped made %d summary calls, want 1 (main only)", got)
	}
	g1, _ := b1.store.GetSummary(ctx, "global", "global")
	m1, _ := b1.store.GetSummary(ctx, "global", "main")
	if g1.UntilMessageID != g0.UntilMessageID || m1.UntilMessageID <= g0.UntilMessageID {
		t.Fatalf("cursors after 1/1 without global: global %d (was %d), main %d", g1.UntilMessageID, g0.UntilMessageID, m1.UntilMessageID)
	}

	// Roll back reads with global still stopped.
	b2 := setupOn(t, dbURL, model, setupOpts{flags: rollback, keepTurns: 2})
	b2.say(t, "turn 13: tell me something")
	n += 2
	b2.waitVisible(t, n)
	mains := sm.bodies()
	last := mains[len(mains)-1]
	if !strings.Contains(last, "GLOBAL-SUMMARY") || strings.Contains(last, "MAIN-SUMMARY") {
		t.Fatalf("after rollback the prompt must read the stale global summary, not main's: %s", last)
	}
	// Turns after the stale global cursor come as recent rows (they fit).
	for i := 7; i <= 12; i++ {
		if !strings.Contains(last, fmt.Sprintf("turn %d: tell me something", i)) {
			t.Fatalf("turn %d (after the stale global cursor) is missing from the rolled-back prompt", i)
		}
	}
	// Global writes back on: the next compaction moves the global cursor.
	b2.park()
	b3 := setupOn(t, dbURL, model, setupOpts{flags: dual, keepTurns: 2})
	b3.say(t, "/compact")
	n += 2
	b3.waitVisible(t, n)
	g3, _ := b3.store.GetSummary(ctx, "global", "global")
	if g3.UntilMessageID <= g0.UntilMessageID {
		t.Fatalf("global cursor did not catch up after writes came back: %d", g3.UntilMessageID)
	}
}

func countSummaryCalls(s *llmtest.Server) int {
	n := 0
	for _, r := range s.Requests() {
		if isSummaryCall(r) {
			n++
		}
	}
	return n
}
