package services

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// ContextQuery selects the messages of one (timeline, context scope) after a
// summary cursor, ascending by id.
type ContextQuery struct {
	TimelineScope string
	ContextScope  string
	AfterID       int64
	Limit         int
	// BeforeID, when set, selects the newest Limit rows with id < BeforeID
	// (still returned ascending): how prompts read history backwards.
	BeforeID int64
	// ByTimelineOnly ignores ContextScope and reads visible rows of the
	// timeline: the legacy read path (AGENT_CONTEXT_SCOPED_READ=0).
	ByTimelineOnly bool
}

// Summary is the summary cursor row of one (timeline, scope): the id of the
// last message covered by archived summaries and the latest summary text.
type Summary struct {
	TimelineScope  string
	Scope          string
	UntilMessageID int64
	SummaryText    string
	UpdatedAt      time.Time
}

// Segment kinds.
const (
	SegmentSummary = "summary"
	SegmentReset   = "reset"
)

// Segment is one archived summary of a (timeline, scope), or a reset marker
// (/new) after which earlier segments are no longer sent.
type Segment struct {
	ID             int64
	TimelineScope  string
	Scope          string
	Kind           string
	FromMessageID  int64
	UntilMessageID int64
	SummaryText    string
	TokenCount     int
	Focus          string
	// TaintedBy names the untrusted sources of the turns a summary was
	// written from ("" when every summarised row was the owner's or the
	// service's, or written by an untainted run): a prompt carrying the
	// summary starts its run tainted.
	TaintedBy string
	CreatedAt time.Time
}

// Constraint is one of the owner's rules for a timeline.
type Constraint struct {
	ID            int64
	TimelineScope string
	Text          string
	Hard          bool
	// Check is a hard rule's check pattern (a Go regexp, "" for none): an
	// answer it matches is flagged under the answer (docs/CONTEXT.md,
	// "Checking answers against rules").
	Check     string
	Version   int
	UpdatedAt time.Time
	// Proposed: the rule came from the agent's proposal the owner approved
	// (not written by the owner): trimmed before the owner's own.
	Proposed bool
}

// MemoryItem is one remembered preference.
type MemoryItem struct {
	ID            int64
	TimelineScope string
	Key           string
	Value         string
	Confidence    float64
	Source        string
	Version       int
	UpdatedAt     time.Time
	// RunID and Origin are the run that remembered the item and the origin
	// that had tainted it ("" for the owner's own), 0/"" when not by a run.
	RunID  int64
	Origin string
}

// ContextStore persists what the ContextManager compiles besides messages.
type ContextStore interface {
	// ListSegments returns the segments of (timeline, scope) after the last
	// reset, oldest first.
	ListSegments(ctx context.Context, timelineScope, scope string) ([]Segment, error)
	// AppendSegment stores a segment and moves the (timeline, scope) cursor
	// to its UntilMessageID in one transaction; ECONFLICT when the cursor is
	// already past it.
	AppendSegment(ctx context.Context, s Segment) (Segment, error)
	// ListConstraints returns a timeline's rules, oldest first.
	ListConstraints(ctx context.Context, timelineScope string) ([]Constraint, error)
	// CreateConstraint stores a rule; EINVALID for empty or oversized text.
	CreateConstraint(ctx context.Context, c Constraint) (Constraint, error)
	// UpdateConstraint changes a rule if its version is c.Version; ECONFLICT
	// (code CONTEXT_BUDGET_CONFLICT) when stale, ENOTFOUND when absent.
	UpdateConstraint(ctx context.Context, c Constraint) (Constraint, error)
	// DeleteConstraint removes a rule at the given version (same errors).
	DeleteConstraint(ctx context.Context, timelineScope string, id int64, version int) error
	// ListMemory returns a timeline's remembered items, highest confidence first.
	ListMemory(ctx context.Context, timelineScope string) ([]MemoryItem, error)
	// UpsertMemory stores an item by key. With Version > 0 the write applies
	// only at that version (ECONFLICT, CONTEXT_BUDGET_CONFLICT, when stale).
	UpsertMemory(ctx context.Context, m MemoryItem) (MemoryItem, error)
	// DeleteMemory removes an item at the given version.
	DeleteMemory(ctx context.Context, timelineScope string, id int64, version int) error
	// ForgetMemory keeps an item's row but out of every prompt; ENOTFOUND
	// when the timeline has no such item.
	ForgetMemory(ctx context.Context, timelineScope string, id int64) error
}

// SummaryCursor is the summary cursor of one (timeline, scope) with its lag:
// the messages of that scope stored after the cursor (the debug page, inspect).
type SummaryCursor struct {
	TimelineScope  string
	Scope          string
	UntilMessageID int64
	SummaryText    string
	LagMessages    int64
	LagTokens      int64
	UpdatedAt      time.Time
}

// PromptInspector shows the owner what the main agent's prompts hold
// (GET /api/context): the inspection of the last prompt as its run's prompt
// step recorded it, and of the next one. Each is a JSON object (layers with
// tokens and budgets, warnings, total, budget, window, prefix hash;
// docs/CONTEXT.md).
type PromptInspector interface {
	// LastPrompt is the last main prompt's inspection and its run id (nil
	// and 0 before the first run).
	LastPrompt(ctx context.Context, timeline string) (inspection json.RawMessage, runID int64, err error)
	// PreviewPrompt builds the next main prompt without an input.
	PreviewPrompt(ctx context.Context, timeline string) (json.RawMessage, error)
	// ExplainPrompt is PreviewPrompt with each layer's text, the tokens
	// of each source, what was trimmed and why, and the request as the
	// model would get it (GET /api/context/preview); no model is called.
	ExplainPrompt(ctx context.Context, timeline string) (json.RawMessage, error)
}

// InputHeaderPrefix starts the line a prompt puts before the current input
// ("[Current date and time: … This message came through …]", then a blank
// line): when and where the message was sent, outside the cached prefix.
const InputHeaderPrefix = "[Current date and time: "

// StripInputHeader returns a prompt's input without that line.
func StripInputHeader(s string) string {
	if h, rest, ok := strings.Cut(s, "]\n\n"); ok && strings.HasPrefix(h, InputHeaderPrefix) {
		return rest
	}
	return s
}

// PromptSources are what a prompt build reads of a timeline besides its
// history, read together: the budget profile (as ContextBudgets reads it,
// BudgetErr its fallback error), the rules, the remembered items, the
// summary cursor of the read scope (zero when none; its text not read)
// and that scope's segments after the last reset.
type PromptSources struct {
	Budget    ContextBudget
	BudgetErr error
	Rules     []Constraint
	Memory    []MemoryItem
	Summary   Summary
	Segments  []Segment
}

// PromptSourceReader reads a build's PromptSources in one statement (one
// snapshot): the prompt manager's Sources, given when the stores it reads
// rules, settings, summaries and the budget profile from are the reader's.
type PromptSourceReader interface {
	ReadPromptSources(ctx context.Context, timelineScope, scope string) (PromptSources, error)
}
