package prompt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
)

// TestPromptCarriesTimeChannelAndSummaryOutsideThePrefix: the current input
// starts with the date and time in the owner's zone and its channel; the
// stable prefix (and its hash) does not change with the clock; the archived
// summary is system content after the prefix, never a user message.
func TestPromptCarriesTimeChannelAndSummaryOutsideThePrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seedTurns(t, s, "global", 3, "talk")
	if _, err := s.AppendSegment(ctx, services.Segment{TimelineScope: "global", Scope: "global", FromMessageID: 1, UntilMessageID: 2,
		SummaryText: "## Archived Session Summary\n\nThe owner likes tea."}); err != nil {
		t.Fatal(err)
	}
	trigger, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "telegram", Content: "what time is it?", Visible: true})
	if err != nil {
		t.Fatal(err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 4, 9, 15, 0, 0, time.UTC)
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Now: func() time.Time { return now }}, prompt.Config{Window: 16000, Location: tokyo})
	build := func() prompt.Prompt {
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger.ID})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := build()
	msgs := p.Request.Messages
	last := msgs[len(msgs)-1]
	want := "[Current date and time: Wednesday 2026-03-04 18:15 JST (Asia/Tokyo). This message came through Telegram.]\n\nwhat time is it?"
	if last.Role != llm.RoleUser || last.Content != want {
		t.Fatalf("current input = %q, want %q", last.Content, want)
	}
	if strings.Contains(p.Request.System, "2026") || strings.Contains(p.Request.System, "tea") {
		t.Fatalf("the stable prefix carries the time or the summary: %q", p.Request.System)
	}
	if !strings.HasPrefix(p.Request.SystemContext, prompt.SummaryPreamble) || !strings.Contains(p.Request.SystemContext, "The owner likes tea.") {
		t.Fatalf("summary not in the system content: %q", p.Request.SystemContext)
	}
	for _, msg := range msgs {
		if strings.Contains(msg.Content, "likes tea") || msg.Content == "Understood." {
			t.Fatalf("summary sent as a conversation message: %+v", msg)
		}
	}
	// An hour later: the input's header moves, the prefix does not.
	now = now.Add(time.Hour)
	p2 := build()
	if p2.Request.System != p.Request.System || p2.Inspection.PrefixHash != p.Inspection.PrefixHash || !p2.Inspection.PrefixUnchanged {
		t.Fatal("the stable prefix changed with the clock")
	}
	if got := p2.Request.Messages[len(p2.Request.Messages)-1].Content; !strings.Contains(got, "19:15 JST") {
		t.Fatalf("the input's time did not follow the clock: %q", got)
	}
	// Past user messages carry no header: only the current input does.
	for _, msg := range p2.Request.Messages[:len(p2.Request.Messages)-1] {
		if strings.Contains(msg.Content, "Current date and time") {
			t.Fatalf("a past message carries the header: %q", msg.Content)
		}
	}
	// A preview (no input) carries no header.
	pv, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main"})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range pv.Request.Messages {
		if strings.Contains(msg.Content, "Current date and time") {
			t.Fatalf("a preview carries the header: %q", msg.Content)
		}
	}
}

// recordingProvider answers every call with a fixed text and keeps the requests.
type recordingProvider struct {
	reply string
	reqs  []llm.Request
}

func (r *recordingProvider) Name() string       { return "openai" }
func (r *recordingProvider) Model() string      { return "test" }
func (r *recordingProvider) ContextWindow() int { return 16000 }
func (r *recordingProvider) Complete(_ context.Context, req llm.Request, _ func(string)) (*llm.Response, error) {
	r.reqs = append(r.reqs, req)
	return &llm.Response{Text: r.reply, StopReason: llm.StopEnd}, nil
}

// TestSummariserIsGivenTimestamps: the transcript the summariser reads
// carries each message's time in the owner's zone, which its instructions
// tell it to take the time range from.
func TestSummariserIsGivenTimestamps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seedTurns(t, s, "global", 6, "talk")
	rows, err := s.ListContext(ctx, services.ContextQuery{TimelineScope: "global", ByTimelineOnly: true, Limit: 1})
	if err != nil || len(rows) == 0 {
		t.Fatal(err)
	}
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	first := "[" + rows[0].CreatedAt.In(tokyo).Format("2006-01-02 15:04 MST") + "] User: q0 talk"
	rp := &recordingProvider{reply: "the owner talked"}
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Summariser: rp}, prompt.Config{Window: 16000, Location: tokyo, Compaction: prompt.CompactionConfig{KeepTurns: 2}})
	if _, err := m.Compact(ctx, "global", "main", ""); err != nil {
		t.Fatal(err)
	}
	if len(rp.reqs) != 1 {
		t.Fatalf("%d summary calls", len(rp.reqs))
	}
	body := rp.reqs[0].Messages[0].Content
	if !strings.Contains(body, first) || !strings.Contains(body, "JST] Assistant: a0 talk") {
		t.Fatalf("transcript lacks timestamps in the owner's zone (want %q):\n%s", first, body)
	}
	if !strings.Contains(body, "take the time range from the first and last of them") {
		t.Fatal("the instructions do not point at the timestamps")
	}
}

// withoutHeader is a prompt message without the current input's date and
// channel line.
func withoutHeader(s string) string {
	if h, rest, ok := strings.Cut(s, "]\n\n"); ok && strings.HasPrefix(h, "[Current date and time: ") {
		return rest
	}
	return s
}
