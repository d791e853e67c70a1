package prompt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// CompactionConfig are compaction's settings (002's turn-aligned
// compaction with summary cursors); its summariser is Deps.Summariser.
type CompactionConfig struct {
	// KeepTurns is how many recent whole turns are never summarised
	// (CONTEXT_KEEP_TURNS; default 10).
	KeepTurns int
	// Trigger is the share of the working set or window at which a scope
	// is compacted (CONTEXT_COMPACT_AT; default 0.8).
	Trigger float64
	// Timeout bounds one summary call (default 120 s); on timeout nothing moves.
	Timeout time.Duration
	// ScopedWrite (AGENT_CONTEXT_SCOPED_WRITE) writes summaries for both the
	// legacy 'global' scope and the context scope, with independent cursors.
	ScopedWrite bool
	// NoGlobal (AGENT_CONTEXT_GLOBAL_WRITE=0, with ScopedWrite) stops
	// writing the 'global' summary: only the context scope's is written.
	NoGlobal bool
	// MaxInputTokens bounds the transcript of one summary call (default: half the window).
	MaxInputTokens int
}

func (o *CompactionConfig) defaults() {
	if o.KeepTurns <= 0 {
		o.KeepTurns = 10
	}
	if o.Trigger <= 0 || o.Trigger > 1 {
		o.Trigger = 0.8
	}
	if o.Timeout <= 0 {
		o.Timeout = 120 * time.Second
	}
}

// CompactResult reports one scope's compaction.
type CompactResult struct {
	Scope    string `json:"scope"`
	Turns    int    `json:"turns"`
	Messages int    `json:"messages"`
	FromID   int64  `json:"from_id,omitempty"`
	UntilID  int64  `json:"until_id,omitempty"`
	Tokens   int    `json:"summary_tokens,omitempty"`
	// Skipped says why nothing was summarised (too few turns).
	Skipped string `json:"skipped,omitempty"`
	// FreeForm: the model did not follow the summary template; its summary
	// was kept as written (non-empty, within the size limit).
	FreeForm bool `json:"free_form,omitempty"`
}

// ShouldCompact reports whether the last prompt's size (provider-reported
// when known) plus the next input reaches the trigger share of the window.
func (m *Manager) ShouldCompact(lastPromptTokens, nextInputTokens int) bool {
	if m.opts.Summariser == nil {
		return false
	}
	return float64(lastPromptTokens+nextInputTokens) >= m.opts.Compaction.Trigger*float64(m.opts.Window)
}

// WorkingSetFull reports whether a scope whose last prompt was ins should
// be compacted before its next input of nextInputTokens: its history turns
// (counted with the tokenizer, so a provider that reports no usage still
// compacts) plus that input reach the trigger share (CONTEXT_COMPACT_AT)
// of the working set, or older turns were already left out, and there are
// more turns than compaction keeps. Compacting at the working set instead
// of the window keeps every prompt small; between compactions history only
// grows at its end, so the prompt's prefix stays byte-stable and the
// provider's cache keeps hitting.
func (m *Manager) WorkingSetFull(ins Inspection, nextInputTokens int) bool {
	if m.opts.Summariser == nil || ins.WorkingSet <= 0 {
		return false
	}
	if ins.HistoryTrimmed > 0 {
		return true
	}
	if ins.HistoryTurns <= m.opts.Compaction.KeepTurns {
		return false // nothing compaction could archive
	}
	return float64(ins.HistoryTurnTokens+nextInputTokens) >= m.opts.Compaction.Trigger*float64(ins.WorkingSet)
}

// WrittenScopes are the summary scopes compaction writes under the flags:
// 'global' (the legacy read path) unless AGENT_CONTEXT_GLOBAL_WRITE=0, and
// the context scope with AGENT_CONTEXT_SCOPED_WRITE.
func (m *Manager) WrittenScopes(contextScope string) []string {
	if m.opts.Compaction.ScopedWrite && contextScope != services.GlobalSummaryScope {
		if m.opts.Compaction.NoGlobal {
			return []string{contextScope}
		}
		return []string{services.GlobalSummaryScope, contextScope}
	}
	return []string{services.GlobalSummaryScope}
}

// Compact summarises the oldest whole turns of every written scope of the
// timeline, keeping the last KeepTurns turns. Each scope has its own cursor;
// a failed or invalid summary moves nothing (the prompt keeps recent turns
// only) and is returned as an error after the other scopes are tried.
func (m *Manager) Compact(ctx context.Context, timeline, contextScope, focus string) ([]CompactResult, error) {
	if m.opts.Summariser == nil {
		return nil, services.Errorf(services.EUNAVAILABLE, "compaction needs a model; none is configured")
	}
	if m.opts.Context == nil {
		return nil, services.Errorf(services.EUNAVAILABLE, "compaction needs the context store")
	}
	m.compactMu.Lock()
	defer m.compactMu.Unlock()
	var results []CompactResult
	var errs []error
	for _, scope := range m.WrittenScopes(contextScope) {
		res, err := m.compactScope(ctx, timeline, scope, focus)
		result := "ok"
		switch {
		case err != nil:
			result = "failed"
			errs = append(errs, fmt.Errorf("scope %s: %w", scope, err))
		case res.Skipped != "":
			result = "skipped"
		case res.FreeForm:
			result = "free_form"
		}
		if m.opts.OnCompaction != nil {
			m.opts.OnCompaction(result)
		}
		results = append(results, res)
	}
	return results, errors.Join(errs...)
}

func (m *Manager) compactScope(ctx context.Context, timeline, scope, focus string) (CompactResult, error) {
	res := CompactResult{Scope: scope}
	cursor := int64(0)
	if sum, err := m.opts.Store.GetSummary(ctx, timeline, scope); err == nil {
		cursor = sum.UntilMessageID
	} else if !services.IsKind(err, services.ENOTFOUND) {
		return res, err
	}
	q := services.ContextQuery{TimelineScope: timeline, ByTimelineOnly: true, AfterID: cursor, Limit: 1000}
	if scope != services.GlobalSummaryScope {
		q = services.ContextQuery{TimelineScope: timeline, ContextScope: scope, AfterID: cursor, Limit: 1000}
	}
	var rows []services.Message
	for len(rows) < 5000 {
		page, err := m.opts.Store.ListContext(ctx, q)
		if err != nil {
			return res, err
		}
		rows = append(rows, page...)
		if len(page) < q.Limit {
			break
		}
		q.AfterID = page[len(page)-1].ID
	}
	turns := groupTurns(rows, timeline)
	// The files' lines go into the summary's transcript, so the summary can
	// still name where a file is.
	files, err := m.filesOf(ctx, timeline, rows)
	if err != nil {
		return res, err
	}
	for i := range turns {
		turns[i].files = files[turns[i].msgs[0].ID]
	}
	keep := m.opts.Compaction.KeepTurns
	if len(turns) <= keep {
		res.Skipped = fmt.Sprintf("%d turn(s) since the last summary; the last %d are always kept", len(turns), keep)
		return res, nil
	}
	old := turns[:len(turns)-keep]
	// Bound the transcript, then find a clean boundary: every row up to the
	// new cursor must belong to a summarised turn (answers can be stored
	// after a later question).
	maxIn := m.opts.Compaction.MaxInputTokens
	if maxIn <= 0 {
		maxIn = m.opts.Window / 2
	}
	tok := m.opts.Tokenizer
	n, used := 0, 0
	for n < len(old) && (n == 0 || used+old[n].tokens <= maxIn) {
		used += old[n].tokens
		n++
	}
	for ; n > 0; n-- {
		if maxID(turns[:n]) < minID(turns[n:]) {
			break
		}
	}
	msgCount := 0
	for _, t := range turns[:n] {
		msgCount += len(t.msgs)
	}
	if n == 0 || msgCount < 3 {
		res.Skipped = "no whole turns can be summarised without splitting one"
		return res, nil
	}
	transcript := renderTranscript(turns[:n], m.historyRule, m.opts.Location)
	cctx, cancel := context.WithTimeout(ctx, m.opts.Compaction.Timeout)
	defer cancel()
	resp, err := m.opts.Summariser.Complete(cctx, llm.Request{
		System:    "You write faithful, compact summaries of conversations for an assistant's memory.",
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: SummaryPrompt(transcript, focus)}},
		MaxTokens: 2048,
	}, nil)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return res, &services.Error{Kind: services.EUNAVAILABLE, Code: CodeSummaryTimeout,
			Message: fmt.Sprintf("the summary model did not answer within %s", m.opts.Compaction.Timeout), Err: err}
	}
	if err != nil {
		return res, err
	}
	text := strings.TrimSpace(resp.Text)
	if err := ValidateSummary(text); err != nil {
		// A weak model that ignores the template still summarised: keep
		// its summary, under the template's title, rather than fail the
		// same way forever. An empty or oversized one is still refused.
		if text == "" || len(text) > MaxSummaryBytes-len(SummaryTitle)-8 {
			return res, err
		}
		m.log.Warn("compaction: the summary does not follow the template; kept as written", "timeline", timeline, "scope", scope, "err", err)
		text, res.FreeForm = "## "+SummaryTitle+"\n\n"+text, true
	}
	seg, err := m.opts.Context.AppendSegment(ctx, services.Segment{
		TimelineScope: timeline, Scope: scope, Kind: services.SegmentSummary,
		FromMessageID: turns[0].msgs[0].ID, UntilMessageID: maxID(turns[:n]),
		SummaryText: text, TokenCount: tok.Count(text), Focus: focus, TaintedBy: turnsTaint(turns[:n]),
	})
	if services.IsKind(err, services.ECONFLICT) {
		// Another compaction (or /new) moved the cursor meanwhile: its
		// summary stands, this one is dropped.
		res.Skipped = "another compaction or /new moved the summary cursor meanwhile"
		return res, nil
	}
	if err != nil {
		return res, err
	}
	res.Turns, res.Messages, res.FromID, res.UntilID, res.Tokens = n, msgCount, seg.FromMessageID, seg.UntilMessageID, seg.TokenCount
	return res, nil
}

// groupTurns groups rows (ascending) into whole turns: a user message and
// every row answering it (reply_to), rows without reply_to joining the turn
// before them. Commands and notices are skipped, as in prompts.
func groupTurns(rows []services.Message, timeline string) []turn {
	var turns []turn
	index := map[int64]int{}
	for _, r := range rows {
		if r.TimelineScope != timeline || !promptable(r) {
			continue
		}
		if r.Role == services.RoleUser {
			index[r.ID] = len(turns)
			turns = append(turns, turn{msgs: []services.Message{r}})
			continue
		}
		i, ok := index[replyTo(r)]
		if !ok {
			if len(turns) == 0 {
				continue
			}
			i = len(turns) - 1
		}
		turns[i].msgs = append(turns[i].msgs, r)
	}
	for i := range turns {
		sort.Slice(turns[i].msgs, func(a, b int) bool { return turns[i].msgs[a].ID < turns[i].msgs[b].ID })
		for _, r := range turns[i].msgs {
			n := r.TokenCount
			if n == 0 {
				n = len(r.Content) / 4
			}
			turns[i].tokens += n + MessageOverhead
		}
	}
	return turns
}

// turnsTaint is what a summary of ts records of their taint: the sources
// its tainted rows record (the first maxSummaryRoots, "; "-joined), ""
// when no row was written under taint. The summary is the model's
// rewording of those rows, so it carries their taint to later prompts.
func turnsTaint(ts []turn) string {
	var roots []string
	for _, t := range ts {
		for _, r := range t.msgs {
			if by := metaOf(r).TaintedBy; by != "" && !slices.Contains(roots, by) && len(roots) < maxSummaryRoots {
				roots = append(roots, by)
			}
		}
	}
	return strings.Join(roots, "; ")
}

// maxSummaryRoots bounds the sources a summary records.
const maxSummaryRoots = 3

func maxID(ts []turn) int64 {
	var m int64
	for _, t := range ts {
		for _, r := range t.msgs {
			m = max(m, r.ID)
		}
	}
	return m
}

func minID(ts []turn) int64 {
	m := int64(1<<63 - 1)
	for _, t := range ts {
		for _, r := range t.msgs {
			m = min(m, r.ID)
		}
	}
	return m
}

// renderTranscript writes turns as plain text for the summary call, each
// message after its time in loc ("[2026-03-04 09:15 CET]"), so the summary
// can say which period it covers; tool results in their compressed history
// form.
func renderTranscript(ts []turn, rule func(string) CompressionRule, loc *time.Location) string {
	var b strings.Builder
	for _, t := range ts {
		for i, row := range t.msgs {
			one := turn{msgs: []services.Message{row}}
			if i == 0 {
				one.files = t.files // the question's attachments, a line each
			}
			for _, msg := range one.render(false, rule) {
				if !row.CreatedAt.IsZero() {
					b.WriteString("[" + row.CreatedAt.In(loc).Format("2006-01-02 15:04 MST") + "] ")
				}
				switch msg.Role {
				case llm.RoleUser:
					b.WriteString("User: ")
				case llm.RoleAssistant:
					b.WriteString("Assistant: ")
					for _, c := range msg.ToolCalls {
						fmt.Fprintf(&b, "[calls %s %s] ", c.Name, truncate(string(c.Arguments), 300))
					}
				case llm.RoleTool:
					b.WriteString("Tool result: ")
				}
				b.WriteString(msg.Content)
				b.WriteString("\n")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
