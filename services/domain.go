package services

import (
	"context"
	"encoding/json"
	"time"
)

// Well-known scope names.
const (
	// DefaultTimeline is the owner's timeline, shared by every channel.
	DefaultTimeline = "global"
	// MainScope is the main agent's context scope.
	MainScope = "main"
	// GlobalSummaryScope is the legacy summary scope read when
	// AGENT_CONTEXT_SCOPED_READ is off.
	GlobalSummaryScope = "global"
)

// Message sources (channels and internal writers).
const (
	SourceTelegram = "telegram"
	SourceWeb      = "web"
	SourceTUI      = "tui"
	SourceAPI      = "api"
	SourceSystem   = "system"
	SourceAgent    = "agent"
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleTool      = "tool"
)

// Message is one row of chat_messages: a user-visible timeline entry
// (Visible) or an internal step of an agent's context scope.
type Message struct {
	ID            int64
	TimelineScope string
	ContextScope  string
	AgentID       string
	Role          string
	Source        string
	Content       string
	Visible       bool
	Metadata      json.RawMessage
	DedupeKey     string
	TokenCount    int
	CreatedAt     time.Time
}

// NewMessage is what InsertMessage stores. Empty TimelineScope and
// ContextScope take the column defaults ('global', 'main'), which is what
// legacy callers relied on.
type NewMessage struct {
	TimelineScope string
	ContextScope  string
	AgentID       string
	Role          string
	Source        string
	Content       string
	Visible       bool
	Metadata      json.RawMessage
	// DedupeKey, when set, makes the insert idempotent per (timeline, source, key).
	DedupeKey  string
	TokenCount int
}

// TimelineQuery selects a page of a timeline by keyset: rows with id > AfterID
// (ascending) or, when BeforeID is set, rows with id < BeforeID (newest first
// in the query, returned ascending).
type TimelineQuery struct {
	TimelineScope string
	AfterID       int64
	BeforeID      int64
	Limit         int
	// IncludeHidden also returns visible = 0 rows (debug views only).
	IncludeHidden bool
}

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

// Run statuses.
const (
	RunQueued      = "queued"
	RunRunning     = "running"
	RunOK          = "ok"
	RunError       = "error"
	RunTimeout     = "timeout"
	RunCancelled   = "cancelled"
	RunInterrupted = "interrupted"
)

// Run is one agent execution (agent_runs).
type Run struct {
	ID                    int64
	TimelineScope         string
	ContextScope          string
	AgentID               string
	ParentRunID           int64 // 0 for a main run
	TriggerMessageID      int64
	Source                string
	Status                string
	Model                 string
	StartedAt             time.Time
	FinishedAt            *time.Time
	HeartbeatAt           *time.Time
	Error                 string
	PromptTokenBudget     int
	EstimatedPromptTokens int
	ModelContextWindow    int
	PromptTokens          int
	CompletionTokens      int
	CachedTokens          int
}

// NewRun is what CreateRun stores.
type NewRun struct {
	TimelineScope    string
	ContextScope     string
	AgentID          string
	ParentRunID      int64
	TriggerMessageID int64
	Source           string
	Status           string
	Model            string
}

// RunFinish closes a run: final status, error text and observed usage.
type RunFinish struct {
	Status                string
	Error                 string
	PromptTokenBudget     int
	EstimatedPromptTokens int
	ModelContextWindow    int
	PromptTokens          int
	CompletionTokens      int
	CachedTokens          int
}

// RunQuery lists runs, newest first.
type RunQuery struct {
	TimelineScope string
	ContextScope  string
	Status        string
	ParentRunID   int64
	BeforeID      int64
	Limit         int
}

// Step kinds.
const (
	StepModelCall  = "model_call"
	StepToolCall   = "tool_call"
	StepToolResult = "tool_result"
	StepHandoff    = "handoff"
	StepError      = "error"
)

// Step is one recorded step of a run (agent_run_steps).
type Step struct {
	ID        int64
	RunID     int64
	Index     int
	Kind      string
	Payload   json.RawMessage
	CreatedAt time.Time
}

// ChatStore persists timeline messages and summary cursors.
type ChatStore interface {
	// InsertMessage stores a message. With a DedupeKey already stored for the
	// same (timeline, source) it returns the existing row and created=false.
	// Returns EINVALID for a bad role or empty source.
	InsertMessage(ctx context.Context, m NewMessage) (msg Message, created bool, err error)
	// GetMessage returns one message; ENOTFOUND when absent.
	GetMessage(ctx context.Context, id int64) (Message, error)
	// ListTimeline returns a page of a timeline in ascending id order.
	ListTimeline(ctx context.Context, q TimelineQuery) ([]Message, error)
	// ListContext returns the messages of a context scope after a cursor.
	ListContext(ctx context.Context, q ContextQuery) ([]Message, error)
	// GetSummary returns the summary cursor of (timeline, scope); ENOTFOUND when absent.
	GetSummary(ctx context.Context, timelineScope, scope string) (Summary, error)
	// UpsertSummary creates or moves the summary cursor of (timeline, scope).
	UpsertSummary(ctx context.Context, s Summary) (Summary, error)
}

// RunStore persists agent runs and their steps.
type RunStore interface {
	// CreateRun inserts a run; EINVALID for an empty source.
	CreateRun(ctx context.Context, r NewRun) (Run, error)
	// GetRun returns one run; ENOTFOUND when absent.
	GetRun(ctx context.Context, id int64) (Run, error)
	// SetRunStatus changes a run's status (e.g. queued → running); ENOTFOUND when absent.
	SetRunStatus(ctx context.Context, id int64, status string) error
	// FinishRun closes an unfinished run; ENOTFOUND when absent, ECONFLICT when
	// it was already finished.
	FinishRun(ctx context.Context, id int64, f RunFinish) (Run, error)
	// ListRuns lists runs newest first.
	ListRuns(ctx context.Context, q RunQuery) ([]Run, error)
	// AppendStep records the next step of a run with the next index.
	AppendStep(ctx context.Context, runID int64, kind string, payload json.RawMessage) (Step, error)
	// ListSteps returns a run's steps in order.
	ListSteps(ctx context.Context, runID int64) ([]Step, error)
	// NextQueuedRun returns the oldest queued main run of a timeline;
	// ENOTFOUND when none is queued.
	NextQueuedRun(ctx context.Context, timelineScope string) (Run, error)
	// SetRunObservation records the prompt budget, estimate and window of a
	// run as soon as its prompt is built.
	SetRunObservation(ctx context.Context, id int64, budget, estimated, window int) error
	// SetRunContextScope sets a run's context scope; ENOTFOUND when absent.
	SetRunContextScope(ctx context.Context, id int64, scope string) error
}

// RunQueue schedules durable execution of queued runs.
type RunQueue interface {
	// EnqueueRunTx schedules run for execution in tx, a Store given by
	// Transact: the job commits (or rolls back) with the run row, so no
	// queued run is ever without its job. While a job for the run is
	// waiting or running, enqueuing it again does nothing.
	EnqueueRunTx(ctx context.Context, tx Store, run Run) error
}

// RunExecutor executes runs for the queue's workers.
type RunExecutor interface {
	// ExecuteRun takes a queued run to its end (ok, error, timeout,
	// cancelled), recording its steps and answer.
	ExecuteRun(ctx context.Context, run Run) error
	// InterruptRun closes a run whose worker died mid-run as interrupted and
	// tells the user.
	InterruptRun(ctx context.Context, run Run) error
}

// Store is every store plus transactions. Transact runs fn with a Store bound
// to one database transaction, committed when fn returns nil and rolled back
// when it returns an error or panics.
type Store interface {
	ChatStore
	RunStore
	Transact(ctx context.Context, fn func(tx Store) error) error
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
	CreatedAt      time.Time
}

// Constraint is one of the owner's rules for a timeline.
type Constraint struct {
	ID            int64
	TimelineScope string
	Text          string
	Hard          bool
	Version       int
	UpdatedAt     time.Time
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
}
