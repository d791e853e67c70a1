package prompt_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// mustNew builds a Manager from d and cfg.
func mustNew(t testing.TB, d prompt.Deps, cfg prompt.Config) *prompt.Manager {
	t.Helper()
	m, err := prompt.New(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A Manager without a store is refused when built, not when it first reads.
func TestNewNeedsAStore(t *testing.T) {
	if m, err := prompt.New(prompt.Deps{}, prompt.Config{}); err == nil || m != nil {
		t.Fatalf("New without a Store: err %v, a manager %t; want an error and none", err, m != nil)
	}
}

func seedTurns(t testing.TB, s *repository.Store, timeline string, n int, text string) int64 {
	t.Helper()
	ctx := context.Background()
	var last int64
	for i := 0; i < n; i++ {
		u, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: timeline, ContextScope: "main", Role: "user", Source: "web", Content: fmt.Sprintf("q%d %s", i, text), Visible: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: timeline, ContextScope: "main", Role: "assistant", Source: "agent", Content: fmt.Sprintf("a%d %s", i, text), Visible: true,
			Metadata: []byte(fmt.Sprintf(`{"reply_to":%d}`, u.ID))}); err != nil {
			t.Fatal(err)
		}
		last = u.ID
	}
	return last
}

func TestBuildNeverExceedsBudgetAndTrimsInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	for i := 0; i < 30; i++ {
		if _, err := s.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: fmt.Sprint("pref", i), Value: strings.Repeat("v ", 40), Confidence: float64(i) / 30}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: "Always be brief.", Hard: true}); err != nil {
		t.Fatal(err)
	}
	seedTurns(t, s, "global", 50, strings.Repeat("talk ", 30))
	trigger, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: "now what?", Visible: true})
	tok := prompt.HeuristicTokenizer{}
	for _, window := range []int{1500, 3000, 8000, 64000} {
		m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Tokenizer: tok}, prompt.Config{Window: window})
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger.ID})
		if err != nil {
			t.Fatalf("window %d: %v", window, err)
		}
		ins := p.Inspection
		if ins.TotalTokens > ins.Budget {
			t.Fatalf("window %d: %d tokens over budget %d", window, ins.TotalTokens, ins.Budget)
		}
		// Measure the real request too.
		real := tok.Count(p.Request.System)
		for _, msg := range p.Request.Messages {
			real += tok.Count(msg.Content) + prompt.MessageOverhead
		}
		if real > ins.Budget {
			t.Fatalf("window %d: request is %d tokens, budget %d", window, real, ins.Budget)
		}
		if !strings.Contains(p.Request.System, "Always be brief.") {
			t.Fatalf("window %d: rules trimmed", window)
		}
		last := p.Request.Messages[len(p.Request.Messages)-1]
		if withoutHeader(last.Content) != "now what?" {
			t.Fatalf("window %d: last message %q", window, last.Content)
		}
		// Settings are kept highest confidence first.
		if strings.Contains(p.Request.System, "pref0:") && !strings.Contains(p.Request.System, "pref29:") {
			t.Fatalf("window %d: a low-confidence setting kept while a high one was trimmed", window)
		}
		// History holds whole turns: it starts with a user message.
		for i, msg := range p.Request.Messages {
			if strings.HasPrefix(msg.Content, "a") && i > 0 && p.Request.Messages[i-1].Role != "user" {
				t.Fatalf("window %d: an answer without its question at %d", window, i)
			}
		}
	}
}

func TestInputTooLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	trigger, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: strings.Repeat("huge ", 5000), Visible: true})
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 2000})
	_, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger.ID})
	if services.ErrorCode(err) != prompt.CodeInputTooLarge || !services.IsKind(err, services.ETOOLARGE) {
		t.Fatalf("want CONTEXT_INPUT_TOO_LARGE, got %v", err)
	}
}

// slowStore blocks GetSummary until released, to hold builds open.
type slowStore struct {
	services.ChatStore
	release chan struct{}
	entered chan struct{}
}

func (s *slowStore) GetSummary(ctx context.Context, tl, scope string) (services.Summary, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.ChatStore.GetSummary(ctx, tl, scope)
}

func TestBackpressure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	slow := &slowStore{ChatStore: s, release: make(chan struct{}), entered: make(chan struct{}, 10)}
	m := mustNew(t, prompt.Deps{Store: slow}, prompt.Config{Window: 8000})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main"}); err != nil {
				t.Error(err)
			}
		}()
	}
	for i := 0; i < 4; i++ {
		<-slow.entered
	}
	_, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main"})
	if services.ErrorCode(err) != prompt.CodeBackpressure {
		t.Fatalf("5th concurrent build: want CONTEXT_BACKPRESSURE, got %v", err)
	}
	// Another timeline is not held back: its build reaches the store
	// while the first timeline's four are still held there.
	done := make(chan error, 1)
	go func() {
		_, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "tg:1", ContextScope: "main"})
		done <- err
	}()
	select {
	case <-slow.entered:
	case err := <-done:
		if err != nil {
			t.Fatalf("other timeline while the first is at its bound: %v", err)
		}
		done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("the other timeline's build never reached the store")
	}
	close(slow.release)
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("other timeline: %v", err)
	}
}

func TestScopeViolationRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	trigger, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: "hi", Visible: true})
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 8000})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger.ID,
		Retrieved: []prompt.RetrievedItem{
			{TimelineScope: "tg:7", Kind: "handoff", Title: "theirs", Text: "PRIVATE DATA OF ANOTHER USER", Score: 1},
			{TimelineScope: "global", Kind: "handoff", Title: "ours", Text: "our result", Score: 0.5},
		}})
	if err != nil {
		t.Fatal(err)
	}
	all := p.Request.System
	for _, msg := range p.Request.Messages {
		all += msg.Content
	}
	if strings.Contains(all, "PRIVATE DATA") || !strings.Contains(all, "our result") {
		t.Fatalf("retrieved layer: %s", all)
	}
	found := false
	for _, w := range p.Inspection.Warnings {
		found = found || w.Code == prompt.CodeScopeViolation
	}
	if !found {
		t.Fatal("no CONTEXT_SCOPE_VIOLATION warning")
	}
	// An input message of another timeline is refused outright.
	other, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "tg:7", Role: "user", Source: "telegram", Content: "x", Visible: true})
	_, err = m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: other.ID})
	if services.ErrorCode(err) != prompt.CodeScopeViolation {
		t.Fatalf("want CONTEXT_SCOPE_VIOLATION, got %v", err)
	}
}

func TestPrefixHashStableAndReadPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seedTurns(t, s, "global", 3, "x")
	// A hidden tool row in main, visible only on the scoped read path.
	u, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Content: "last", Visible: true})
	_, _, _ = s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "tool", Source: "agent", Content: "HIDDEN STEP",
		Metadata: []byte(fmt.Sprintf(`{"reply_to":%d,"tool_call_id":"c1"}`, u.ID))})
	_, _, _ = s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "sub:r:1", Role: "assistant", Source: "agent", Content: "CHILD STEP"})
	legacy := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 8000})
	scoped := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 8000, ScopedRead: true})
	p1, _ := legacy.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: u.ID})
	p2, _ := legacy.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: u.ID})
	if p1.Inspection.PrefixUnchanged || !p2.Inspection.PrefixUnchanged || p1.Inspection.PrefixHash != p2.Inspection.PrefixHash {
		t.Fatalf("prefix: first unchanged=%v second unchanged=%v", p1.Inspection.PrefixUnchanged, p2.Inspection.PrefixUnchanged)
	}
	if _, err := s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: "new rule", Hard: true}); err != nil {
		t.Fatal(err)
	}
	p3, _ := legacy.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: u.ID})
	if p3.Inspection.PrefixUnchanged || p3.Inspection.PrefixHash == p1.Inspection.PrefixHash {
		t.Fatal("a new rule did not change the stable prefix")
	}
	text := func(p prompt.Prompt) string {
		var b strings.Builder
		for _, m := range p.Request.Messages {
			b.WriteString(m.Content + "|")
		}
		return b.String()
	}
	ps, _ := scoped.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: u.ID})
	if strings.Contains(text(p1), "HIDDEN STEP") || !strings.Contains(text(ps), "HIDDEN STEP") {
		t.Fatal("read paths: legacy must read visible rows only, scoped the main scope's rows")
	}
	if strings.Contains(text(p1), "CHILD STEP") || strings.Contains(text(ps), "CHILD STEP") {
		t.Fatal("a sub-agent step entered a main prompt")
	}
	if p1.Inspection.ReadScope != "global" || ps.Inspection.ReadScope != "main" {
		t.Fatalf("read scopes %q %q", p1.Inspection.ReadScope, ps.Inspection.ReadScope)
	}
}

func TestVersionedUpdatesConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	c, _ := s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: "v1", Hard: true})
	c2, err := s.UpdateConstraint(ctx, services.Constraint{ID: c.ID, TimelineScope: "global", Text: "v2", Hard: true, Version: c.Version})
	if err != nil || c2.Version != c.Version+1 {
		t.Fatalf("update: %+v %v", c2, err)
	}
	_, err = s.UpdateConstraint(ctx, services.Constraint{ID: c.ID, TimelineScope: "global", Text: "stale", Hard: true, Version: c.Version})
	if services.ErrorCode(err) != prompt.CodeBudgetConflict || !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("stale update: %v", err)
	}
	if err := s.DeleteConstraint(ctx, "global", c.ID, c.Version); services.ErrorCode(err) != prompt.CodeBudgetConflict {
		t.Fatalf("stale delete: %v", err)
	}
	if err := s.DeleteConstraint(ctx, "tg:1", c.ID, c2.Version); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("delete from another timeline: %v", err)
	}
	m, _ := s.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: "k", Value: "a", Confidence: 0.5})
	if _, err := s.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: "k", Value: "b", Confidence: 0.5, Version: m.Version + 5}); services.ErrorCode(err) != prompt.CodeBudgetConflict {
		t.Fatalf("stale memory: %v", err)
	}
	if _, err := s.UpsertMemory(ctx, services.MemoryItem{TimelineScope: "global", Key: "k", Value: "b", Confidence: 1.5}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("confidence 1.5: %v", err)
	}
}

// History longer than one page (200 rows) is read newest first: the prompt
// holds the latest turns, and with a short window the oldest are the ones
// left out.
func TestHistoryPagesBackwardsFromTheNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	last := seedTurns(t, s, "global", 260, "words")
	for _, window := range []int{4000, 128000} {
		m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: window, ScopedRead: true})
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: last})
		if err != nil {
			t.Fatalf("window %d: %v", window, err)
		}
		msgs := p.Request.Messages
		if withoutHeader(msgs[len(msgs)-2].Content) != "q259 words" || msgs[len(msgs)-3].Content != "a258 words" {
			t.Fatalf("window %d: prompt ends %q, %q", window, msgs[len(msgs)-3].Content, msgs[len(msgs)-2].Content)
		}
		if window == 128000 && msgs[0].Content != "q0 words" {
			t.Fatalf("a large window must hold the whole history, starts with %q", msgs[0].Content)
		}
	}
}

// TestDeferredToolListInTheStablePrefix: the list of deferred tools goes
// into the system prompt right after the base prompt, before the rules,
// and into the prefix hash; the same list gives the same prefix turn after
// turn, and no list gives exactly the prompt without one.
func TestDeferredToolListInTheStablePrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seedTurns(t, s, "global", 2, "x")
	u, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Content: "last", Visible: true})
	if _, err := s.CreateConstraint(ctx, services.Constraint{TimelineScope: "global", Text: "a rule", Hard: true}); err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s}, prompt.Config{Window: 8000, SystemPrompt: "BASE"})
	const list = "## More tools\n\n- web: fetch a web page (fetch_url)"
	bp := prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: u.ID}
	plain, _ := m.Build(ctx, bp)
	bp.Deferred = list
	with1, _ := m.Build(ctx, bp)
	with2, _ := m.Build(ctx, bp)
	if !strings.HasPrefix(with1.Request.System, "BASE\n\n"+list+"\n\n") || !strings.Contains(with1.Request.System, "a rule") {
		t.Fatalf("system prompt: %q", with1.Request.System)
	}
	if with1.Inspection.PrefixHash == plain.Inspection.PrefixHash || !with2.Inspection.PrefixUnchanged || with2.Inspection.PrefixHash != with1.Inspection.PrefixHash {
		t.Fatal("the list is not part of the stable prefix, or the prefix moved between turns")
	}
	if with1.Inspection.Layers[0].Tokens <= plain.Inspection.Layers[0].Tokens {
		t.Fatal("the list's tokens are not counted in the system layer")
	}
	bp.Deferred = ""
	again, _ := m.Build(ctx, bp)
	if again.Request.System != plain.Request.System || again.Inspection.PrefixHash != plain.Inspection.PrefixHash {
		t.Fatal("without a list the prompt differs from before")
	}
}

// The history layer counts the earlier turns and never the input, which
// the input layer counts with its header: a first message's history is
// empty (not negative), and the layers add up to the request's tokens.
func TestHistoryLayerLeavesTheInputToTheInputLayer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	tok := prompt.HeuristicTokenizer{}
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Tokenizer: tok}, prompt.Config{Window: 64000})
	layer := func(ins prompt.Inspection, l prompt.Layer) prompt.LayerReport {
		for _, r := range ins.Layers {
			if r.Layer == l {
				return r
			}
		}
		t.Fatalf("no %s layer in %+v", l, ins.Layers)
		return prompt.LayerReport{}
	}
	first, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: "hello there", Visible: true})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	if h := layer(p.Inspection, prompt.LayerHistory); h.Tokens != 0 || h.Items != 0 {
		t.Fatalf("first message: history %d tokens, %d items; want none", h.Tokens, h.Items)
	}
	if in := layer(p.Inspection, prompt.LayerInput); in.Tokens <= 0 {
		t.Fatalf("first message: input %d tokens", in.Tokens)
	}
	last := seedTurns(t, s, "global", 3, "earlier talk")
	next, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: "and now?", Visible: true})
	p, err = m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: next.ID})
	if err != nil || last >= next.ID {
		t.Fatal(err)
	}
	// The earlier turns as history holds them: each message and its overhead.
	want := 0
	for _, msg := range p.Request.Messages[:len(p.Request.Messages)-1] {
		want += tok.Count(msg.Content) + prompt.MessageOverhead + 1
	}
	if h := layer(p.Inspection, prompt.LayerHistory); h.Tokens != want || h.Items != 4 {
		t.Fatalf("history %d tokens, %d items; want %d tokens and 4 turns (the first message and the seeded three)", h.Tokens, h.Items, want)
	}
}
