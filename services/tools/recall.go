package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
)

// The recall tools disclose the archive in three steps (docs/CONTEXT.md,
// "Recall"): recall_search gives a compact index (ids, dates, one line
// each, what the whole item costs), recall_timeline the turns around one
// id, recall_detail whole items by id. Each answers within a token budget
// that follows the model's window, and reads only what the calling scope
// may (services.RecallView).

// RecallWindow is what the recall tools read of the prompt's context
// manager: the scope a context scope reads (ReadScope) and the prompt's
// budget in tokens, which their answers' budgets follow.
type RecallWindow interface {
	ReadScope(contextScope string) string
	Budget() int
}

// RecallHistory is what the recall tools read of the runs and their rows:
// the question a run answers (the archive is what came before it) and the
// row of main that carries a sub-agent's handoff.
type RecallHistory interface {
	RunReader
	ListContext(ctx context.Context, q services.ContextQuery) ([]services.Message, error)
}

// Counter counts the tokens of a text (the prompt's tokenizer).
type Counter interface {
	Count(text string) int
}

// Recall are the recall tools: recall_search, recall_timeline and
// recall_detail over Archive.
type Recall struct {
	Archive services.RecallStore
	Runs    RecallHistory
	// Window gives the scope read and the budgets (nil: main's rows, and
	// each budget at its ceiling).
	Window RecallWindow
	Tokens Counter
}

// RecallView is what the calling scope may recall: its own rows and what
// main reads (window: the context manager; nil reads main).
func RecallView(window RecallWindow, call Call) services.RecallView {
	read := services.MainScope
	if window != nil {
		read = window.ReadScope(services.MainScope)
	}
	return services.NewRecallView(call.TimelineScope, call.ContextScope, read)
}

func (r Recall) view(call Call) services.RecallView { return RecallView(r.Window, call) }

// budget is a recall tool's answer budget: a share of the prompt budget,
// between floor and ceiling tokens.
func (r Recall) budget(share, floor, ceiling int) int {
	b := ceiling
	if r.Window != nil {
		b = r.Window.Budget() / share
	}
	return max(floor, min(b, ceiling))
}

func (r Recall) searchBudget() int   { return r.budget(10, 120, 1000) }
func (r Recall) timelineBudget() int { return r.budget(8, 200, 2000) }
func (r Recall) detailBudget() int   { return r.budget(5, 300, 6000) }

// Register adds recall_search, recall_timeline and recall_detail.
func (r Recall) Register(reg *Registry) error {
	if r.Archive == nil || r.Runs == nil || r.Tokens == nil {
		return errors.New("recall tools: Archive, Runs and Tokens are required")
	}
	for _, t := range []Tool{
		Func("recall_search", services.EffectRead,
			"Search this conversation's whole archive, summarised turns included. Returns an index: id, date, role, "+
				"one line, tokens to read the item. Use a few distinctive words; all must match (else any). "+
				"Then recall_timeline or recall_detail.",
			r.search).WithHistory(HistoryRule{MaxChars: 800, Form: SearchForm(recallSearchFields)}),
		Func("recall_timeline", services.EffectRead,
			"The messages around an archive id, one line each.",
			r.timeline).WithHistory(HistoryRule{MaxChars: 800}),
		Func("recall_detail", services.EffectRead,
			"Read archived messages or summaries whole, by id.",
			r.detail).WithHistory(HistoryRule{MaxChars: 1200}),
	} {
		if err := reg.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// recallSearchFields is where recall_search's index keeps its matches,
// for its history form: each entry's id (what recall_detail reads it by)
// and its line.
var recallSearchFields = SearchFields{Query: "query", Matches: "results", Where: []string{"id"}, Text: "text"}

type recallSearchArgs struct {
	Query  string `json:"query" jsonschema:"Words to find."`
	Limit  int    `json:"limit,omitempty" jsonschema:"1-30, default 10."`
	After  string `json:"after,omitempty" jsonschema:"From this date: YYYY-MM-DD or RFC 3339 (UTC)."`
	Before string `json:"before,omitempty" jsonschema:"Before this date."`
}

// recallEntry is one line of an index: the id to read it by, and what
// reading it whole costs.
type recallEntry struct {
	ID     string  `json:"id"`
	Date   string  `json:"date"`
	Role   string  `json:"role"`
	Tokens int     `json:"tokens"`
	Score  float64 `json:"score,omitempty"`
	Text   string  `json:"text"`
	Center bool    `json:"match,omitempty"`
}

type recallIndex struct {
	Query   string        `json:"query,omitempty"`
	Match   string        `json:"match,omitempty"`
	Results []recallEntry `json:"results"`
	// More counts entries left out for the budget.
	More   int    `json:"more,omitempty"`
	Budget int    `json:"budget_tokens"`
	Note   string `json:"note,omitempty"`
}

// RecallDate is how recall answers and observations date an item.
func RecallDate(t time.Time) string { return t.UTC().Format("2006-01-02 15:04Z") }

// parseRecallDate reads YYYY-MM-DD (UTC midnight) or RFC 3339.
func parseRecallDate(arg, v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, services.Errorf(services.EINVALID, "argument %q: %q is not a date (YYYY-MM-DD or an RFC 3339 time)", arg, v)
}

func hitRole(h services.RecallHit) string {
	switch {
	case h.Kind == services.RecallSummary:
		return "summary"
	case h.MessageKind == services.MetaHandoff:
		return "handoff"
	}
	return string(h.Role)
}

func (r Recall) search(ctx context.Context, call Call, a recallSearchArgs) (Result, error) {
	limit := a.Limit
	if limit == 0 {
		limit = 10
	}
	if limit < 1 || limit > 30 {
		return ErrorResult(CodeBadArguments, fmt.Sprintf("argument \"limit\": %d is not between 1 and 30", a.Limit)), nil
	}
	after, err := parseRecallDate("after", a.After)
	if err != nil {
		return ErrorResult(CodeBadArguments, services.ErrorMessage(err)), nil
	}
	before, err := parseRecallDate("before", a.Before)
	if err != nil {
		return ErrorResult(CodeBadArguments, services.ErrorMessage(err)), nil
	}
	terms := services.RecallTerms(a.Query)
	if len(terms) == 0 {
		return ErrorResult(CodeBadArguments, "argument \"query\": no words to look for"), nil
	}
	q := services.RecallQuery{View: r.view(call), Terms: terms, After: after, Before: before, Limit: limit}
	// The question being answered (and what came after it) is in the
	// prompt already: the archive is what came before.
	if call.RunID != 0 {
		if run, err := r.Runs.GetRun(ctx, call.RunID); err == nil && run.TriggerMessageID > 0 {
			q.MaxID = run.TriggerMessageID - 1
		}
	}
	hits, err := r.Archive.SearchRecall(ctx, q)
	if err != nil {
		return Result{}, err
	}
	out := recallIndex{Query: strings.Join(terms, " "), Match: "all words", Budget: r.searchBudget(), Results: []recallEntry{}}
	if len(hits) == 0 && len(terms) > 1 {
		q.AnyTerm = true
		if hits, err = r.Archive.SearchRecall(ctx, q); err != nil {
			return Result{}, err
		}
		out.Match = "any word"
	}
	if len(hits) == 0 {
		out.Match, out.Note = "", "nothing in the archive has these words; try other or fewer words"
	}
	used := r.Tokens.Count(string(mustJSON(out)))
	for _, h := range hits {
		e := recallEntry{ID: h.Ref(), Date: RecallDate(h.CreatedAt), Role: hitRole(h), Tokens: h.Tokens,
			Score: float64(int(h.Score*1000)) / 1000, Text: truncateText(h.Snippet, 160)}
		if h.Kind == services.RecallSummary {
			e.Text = fmt.Sprintf("(summary of m%d-m%d) %s", h.FromID, h.UntilID, e.Text)
		}
		n := r.Tokens.Count(string(mustJSON(e))) + 1
		if used+n > out.Budget {
			out.More = len(hits) - len(out.Results)
			break
		}
		used += n
		out.Results = append(out.Results, e)
	}
	return JSONResult(out)
}

type recallTimelineArgs struct {
	ID     string `json:"id" jsonschema:"m123 (a message) or s4 (a summary: its first messages)."`
	Before int    `json:"before,omitempty" jsonschema:"0-20, default 4."`
	After  int    `json:"after,omitempty" jsonschema:"0-20, default 4."`
}

func (r Recall) timeline(ctx context.Context, call Call, a recallTimelineArgs) (Result, error) {
	kind, id, err := services.ParseRecallRef(a.ID)
	if err != nil {
		return ErrorResult(CodeBadArguments, "argument \"id\": "+services.ErrorMessage(err)), nil
	}
	before, after := a.Before, a.After
	if before == 0 && after == 0 {
		before, after = 4, 4
	}
	if before < 0 || before > 20 || after < 0 || after > 20 {
		return ErrorResult(CodeBadArguments, "arguments \"before\" and \"after\" are between 0 and 20"), nil
	}
	view := r.view(call)
	center := id
	if kind == services.RecallSummary {
		segs, err := r.Archive.RecallSegments(ctx, view, []int64{id})
		if err != nil {
			return Result{}, err
		}
		if len(segs) == 0 {
			return Result{}, services.Errorf(services.ENOTFOUND, "summary %s is not in this conversation's archive", a.ID)
		}
		center, before = segs[0].FromMessageID, 0
	}
	rows, err := r.Archive.RecallAround(ctx, view, center, before, after)
	if services.IsKind(err, services.ENOTFOUND) && kind == services.RecallSummary {
		return Result{}, services.Errorf(services.ENOTFOUND, "the messages summary %s covers are not readable here", a.ID)
	}
	if err != nil {
		return Result{}, err
	}
	out := recallIndex{Budget: r.timelineBudget(), Results: []recallEntry{}}
	used := r.Tokens.Count(string(mustJSON(out)))
	entries := make([]recallEntry, len(rows))
	for i, m := range rows {
		entries[i] = messageEntry(m, r.Tokens.Count)
		entries[i].Center = m.ID == center
	}
	// Keep the center, then grow outwards while the budget lasts.
	var ci int
	for i, m := range rows {
		if m.ID == center {
			ci = i
		}
	}
	lo, hi := ci, ci+1
	used += r.Tokens.Count(string(mustJSON(entries[ci])))
	for grew := true; grew; {
		grew = false
		if lo > 0 {
			if n := r.Tokens.Count(string(mustJSON(entries[lo-1]))) + 1; used+n <= out.Budget {
				lo, used, grew = lo-1, used+n, true
			}
		}
		if hi < len(entries) {
			if n := r.Tokens.Count(string(mustJSON(entries[hi]))) + 1; used+n <= out.Budget {
				hi, used, grew = hi+1, used+n, true
			}
		}
	}
	out.Results = entries[lo:hi]
	out.More = len(entries) - (hi - lo)
	return JSONResult(out)
}

// messageEntry is a row as one line of an index.
func messageEntry(m services.Message, count func(string) int) recallEntry {
	tokens := m.TokenCount
	if tokens == 0 {
		tokens = count(m.Content)
	}
	role := string(m.Role)
	meta := m.Meta
	switch {
	case meta.Kind == services.MetaHandoff:
		role = "handoff"
	case m.Role == services.RoleTool && meta.ToolName != "":
		role = "tool " + meta.ToolName
	case m.Role == services.RoleAssistant && len(meta.ToolCalls) > 0 && strings.TrimSpace(m.Content) == "":
		var names []string
		for _, c := range meta.ToolCalls {
			names = append(names, c.Name)
		}
		return recallEntry{ID: services.RecallRef(services.RecallMessage, m.ID), Date: RecallDate(m.CreatedAt), Role: "assistant",
			Tokens: tokens, Text: "(calls " + strings.Join(names, ", ") + ")"}
	}
	return recallEntry{ID: services.RecallRef(services.RecallMessage, m.ID), Date: RecallDate(m.CreatedAt), Role: role,
		Tokens: tokens, Text: truncateText(strings.Join(strings.Fields(m.Content), " "), 160)}
}

type recallDetailArgs struct {
	IDs       []string `json:"ids" jsonschema:"1-20 ids: m123 (message), s4 (summary)."`
	MaxTokens int      `json:"max_tokens,omitempty" jsonschema:"A smaller budget in tokens."`
}

type recallItem struct {
	ID     string `json:"id"`
	Date   string `json:"date"`
	Role   string `json:"role"`
	Source string `json:"source,omitempty"`
	Covers string `json:"covers,omitempty"`
	Text   string `json:"text"`
	// Cut says how much of the text was left out for the budget.
	Cut string `json:"cut,omitempty"`
}

type recallDetailOut struct {
	Items []recallItem `json:"items"`
	// Missing are ids not in this conversation's archive (or not readable
	// from this scope); Skipped, ids left out for the budget.
	Missing []string `json:"missing,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	Budget  int      `json:"budget_tokens"`
}

func (r Recall) detail(ctx context.Context, call Call, a recallDetailArgs) (Result, error) {
	if len(a.IDs) == 0 || len(a.IDs) > 20 {
		return ErrorResult(CodeBadArguments, fmt.Sprintf("argument \"ids\": %d ids; give 1 to 20", len(a.IDs))), nil
	}
	budget := r.detailBudget()
	if a.MaxTokens < 0 {
		return ErrorResult(CodeBadArguments, "argument \"max_tokens\" is negative"), nil
	}
	if a.MaxTokens > 0 {
		budget = min(budget, max(a.MaxTokens, 50))
	}
	var msgIDs, segIDs []int64
	type ref struct {
		kind string
		id   int64
		raw  string
	}
	var refs []ref
	for _, raw := range a.IDs {
		if child, ok := parseHandoffRef(raw); ok {
			// A handoff's recall id names its sub-agent run: read the row
			// that carries it, under the caller's view like any message.
			id, err := r.handoffMessage(ctx, call.TimelineScope, child)
			if err != nil {
				return Result{}, err
			}
			refs = append(refs, ref{services.RecallMessage, id, raw})
			msgIDs = append(msgIDs, id)
			continue
		}
		kind, id, err := services.ParseRecallRef(raw)
		if err != nil {
			return ErrorResult(CodeBadArguments, "argument \"ids\": "+services.ErrorMessage(err)), nil
		}
		refs = append(refs, ref{kind, id, raw})
		if kind == services.RecallSummary {
			segIDs = append(segIDs, id)
		} else {
			msgIDs = append(msgIDs, id)
		}
	}
	view := r.view(call)
	msgs, err := r.Archive.RecallMessages(ctx, view, msgIDs)
	if err != nil {
		return Result{}, err
	}
	segs, err := r.Archive.RecallSegments(ctx, view, segIDs)
	if err != nil {
		return Result{}, err
	}
	items := map[string]recallItem{}
	for _, m := range msgs {
		e := messageEntry(m, r.Tokens.Count)
		items[e.ID] = recallItem{ID: e.ID, Date: e.Date, Role: e.Role, Source: string(m.Source), Text: m.Content}
	}
	for _, g := range segs {
		id := services.RecallRef(services.RecallSummary, g.ID)
		items[id] = recallItem{ID: id, Date: RecallDate(g.CreatedAt), Role: "summary",
			Covers: fmt.Sprintf("m%d-m%d", g.FromMessageID, g.UntilMessageID), Text: g.SummaryText}
	}
	out := recallDetailOut{Items: []recallItem{}, Budget: budget}
	used := r.Tokens.Count(string(mustJSON(out)))
	seen := map[string]bool{}
	for _, f := range refs {
		id := services.RecallRef(f.kind, f.id)
		if seen[id] {
			continue
		}
		seen[id] = true
		it, ok := items[id]
		if !ok {
			out.Missing = append(out.Missing, f.raw)
			continue
		}
		n := r.Tokens.Count(string(mustJSON(it))) + 1
		if used+n <= budget {
			out.Items = append(out.Items, it)
			used += n
			continue
		}
		// The first item that does not fit whole is cut to what is left
		// (saying so); later ones are skipped.
		left := budget - used - r.Tokens.Count(string(mustJSON(recallItem{ID: it.ID, Date: it.Date, Role: it.Role, Source: it.Source, Covers: it.Covers, Cut: "0000000 of 0000000 tokens left out"}))) - 2
		if left >= 40 && len(out.Skipped) == 0 {
			full := r.Tokens.Count(it.Text)
			it.Text = cutToTokens(it.Text, left, r.Tokens.Count)
			it.Cut = fmt.Sprintf("%d of %d tokens left out", full-r.Tokens.Count(it.Text), full)
			out.Items = append(out.Items, it)
			used = budget
			continue
		}
		out.Skipped = append(out.Skipped, f.raw)
	}
	return JSONResult(out)
}

// cutToTokens keeps the longest prefix of text (by runes) within n tokens.
func cutToTokens(text string, n int, count func(string) int) string {
	r := []rune(text)
	lo, hi := 0, len(r)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if count(string(r[:mid])+"…") <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return string(r[:lo]) + "…"
}

// HandoffRef is a handoff's recall id: h<child run id>.
func HandoffRef(child int64) string { return fmt.Sprintf("h%d", child) }

// parseHandoffRef reads a handoff's recall id ("h12"); ok is false for
// any other id.
func parseHandoffRef(ref string) (int64, bool) {
	r := strings.TrimSpace(ref)
	if len(r) < 2 || (r[0] != 'h' && r[0] != 'H') {
		return 0, false
	}
	id, err := strconv.ParseInt(r[1:], 10, 64)
	return id, err == nil && id > 0
}

// handoffMessage is the id of the row of main that carries the handoff of
// sub-agent run child (its delegate call's result), 0 when timeline holds
// none. The row follows its parent's trigger message.
func (r Recall) handoffMessage(ctx context.Context, timeline string, child int64) (int64, error) {
	run, err := r.Runs.GetRun(ctx, child)
	if services.IsKind(err, services.ENOTFOUND) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if run.ParentRunID == 0 || run.TimelineScope != timeline {
		return 0, nil
	}
	parent, err := r.Runs.GetRun(ctx, run.ParentRunID)
	if err != nil {
		return 0, err
	}
	rows, err := r.Runs.ListContext(ctx, services.ContextQuery{TimelineScope: timeline, ContextScope: services.MainScope,
		AfterID: parent.TriggerMessageID, Limit: 500})
	if err != nil {
		return 0, err
	}
	for _, m := range rows {
		if m.Role != services.RoleTool {
			continue
		}
		if m.Meta.Kind == services.MetaHandoff && m.Meta.ChildRunID == child {
			return m.ID, nil
		}
	}
	return 0, nil
}

func truncateText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
