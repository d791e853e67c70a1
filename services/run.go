package services

import (
	"context"
	"encoding/json"
	"time"
)

// RunStatus is where a run is: queued, running, or how it ended.
type RunStatus string

// Run statuses.
const (
	RunQueued      RunStatus = "queued"
	RunRunning     RunStatus = "running"
	RunOK          RunStatus = "ok"
	RunError       RunStatus = "error"
	RunTimeout     RunStatus = "timeout"
	RunCancelled   RunStatus = "cancelled"
	RunInterrupted RunStatus = "interrupted"
	// RunWaiting ended its attempt holding tool calls for the owner's
	// approval; a run of the same trigger resumes after the decision.
	RunWaiting RunStatus = "waiting"
)

// Run is one agent execution (agent_runs).
type Run struct {
	ID                    int64
	TimelineScope         string
	ContextScope          string
	AgentID               string
	ParentRunID           int64 // 0 for a main run
	TriggerMessageID      int64
	Source                Source
	Status                RunStatus
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
	// TaintedBy is the origin that tainted the run ("after reading
	// http://…"), "" while only the owner's and the service's text entered
	// its context.
	TaintedBy string
	// ResumesRunID is the waiting run this one resumes after the owner's
	// decisions (0: a run of its own trigger's, with no held calls).
	ResumesRunID int64
	// Announced: the claim that started the run also sent its `running`
	// status to the other instances (NOTIFY with the claim's commit); the
	// executor then delivers it in this process only. From CreateRun
	// (NewRun.Announce): the insert sent its status. Not stored.
	Announced bool
}

// IsMain reports whether r is a run of the main agent (answering a
// message of its timeline, under the timeline's run lock): not a
// sub-agent's and not a schedule's fire.
func (r Run) IsMain() bool { return r.ParentRunID == 0 && r.AgentID != ScheduleAgent }

// NewRun is what CreateRun stores.
type NewRun struct {
	TimelineScope    string
	ContextScope     string
	AgentID          string
	ParentRunID      int64
	TriggerMessageID int64
	Source           Source
	Status           RunStatus
	Model            string
	// TaintedBy starts the run tainted (a resumed run keeps its taint).
	TaintedBy string
	// ResumesRunID is the waiting run this one resumes (same trigger).
	ResumesRunID int64
	// Announce: the insert may send the run's status to the other
	// instances with its transaction's commit, with the events the
	// transaction published before it (the run comes back Announced; the
	// caller then delivers the status in this process only).
	Announce bool
}

// RunFinish closes a run: final status, error text and observed usage.
type RunFinish struct {
	Status                RunStatus
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
	Status        RunStatus
	ParentRunID   int64
	BeforeID      int64
	Limit         int
}

// StepKind is what a recorded step holds.
type StepKind string

// Step kinds.
const (
	StepPrompt     StepKind = "prompt"
	StepModelCall  StepKind = "model_call"
	StepToolCall   StepKind = "tool_call"
	StepToolResult StepKind = "tool_result"
	StepHandoff    StepKind = "handoff"
	StepError      StepKind = "error"
)

// Step is one recorded step of a run (agent_run_steps).
type Step struct {
	ID        int64
	RunID     int64
	Index     int
	Kind      StepKind
	Payload   json.RawMessage
	CreatedAt time.Time
}

// RunStore persists agent runs and their steps.
type RunStore interface {
	// CreateRun inserts a run; EINVALID for an empty source.
	CreateRun(ctx context.Context, r NewRun) (Run, error)
	// GetRun returns one run; ENOTFOUND when absent.
	GetRun(ctx context.Context, id int64) (Run, error)
	// StartRun marks a queued run running and returns it; started is false
	// (and the run as it is) when it is not queued any more. ENOTFOUND when
	// absent. It commits without waiting for its WAL flush: a database
	// crash that loses it leaves the run queued, to be run again.
	StartRun(ctx context.Context, id int64) (run Run, started bool, err error)
	// FinishRun closes an unfinished run; ENOTFOUND when absent, ECONFLICT when
	// it was already finished.
	FinishRun(ctx context.Context, id int64, f RunFinish) (Run, error)
	// ListRuns lists runs newest first.
	ListRuns(ctx context.Context, q RunQuery) ([]Run, error)
	// AppendStep records the next step of a run with the next index.
	AppendStep(ctx context.Context, runID int64, kind StepKind, payload json.RawMessage) (Step, error)
	// ListSteps returns a run's steps in order.
	ListSteps(ctx context.Context, runID int64) ([]Step, error)
	// NextQueuedRun returns the oldest queued main run of a timeline;
	// ENOTFOUND when none is queued.
	NextQueuedRun(ctx context.Context, timelineScope string) (Run, error)
	// MainRunTimelines lists the timelines that have a main run (Run.IsMain)
	// in status, once each, the one whose run of it is oldest first, at
	// most limit: where the queue looks for orphaned and unattended runs.
	MainRunTimelines(ctx context.Context, status RunStatus, limit int) ([]string, error)
	// ClaimNextRun starts the oldest queued main run of a timeline in one
	// statement (queued → running, committed without waiting for its WAL
	// flush, as StartRun) and completes the agent_turn job still waiting
	// for it, whose work this is. The caller holds the timeline's run lock,
	// so main runs of the timeline still running lost their worker: when
	// there are any, nothing is started and they are returned as orphans,
	// to be closed first. A zero run and no orphans: nothing is queued.
	ClaimNextRun(ctx context.Context, timelineScope string) (run Run, orphans []Run, err error)
	// SetRunObservation records the prompt budget, estimate and window of a
	// run as soon as its prompt is built. These are diagnostics: the
	// transaction it runs in commits without waiting for its WAL flush (a
	// later commit's flush makes it durable; a database crash before that
	// loses only the observation, and the run is ended as any run in flight).
	SetRunObservation(ctx context.Context, id int64, budget, estimated, window int) error
	// SetRunContextScope sets a run's context scope; ENOTFOUND when absent.
	SetRunContextScope(ctx context.Context, id int64, scope string) error
	// SetRunTaint records the origin that tainted a run; the first one
	// stays (a run is tainted to its end).
	SetRunTaint(ctx context.Context, id int64, origin string) error
}

// RunQueue schedules durable execution of queued runs.
type RunQueue interface {
	// EnqueueRunTx schedules run for execution in tx: the job commits (or rolls back) with the run row, so no
	// queued run is ever without its job. While a job for the run is
	// waiting or running, enqueuing it again does nothing.
	EnqueueRunTx(ctx context.Context, tx Tx, run Run) error
	// StartRunTx is EnqueueRunTx for a run this process would rather start
	// itself. When it serves turns and has a worker free, the job is
	// inserted to wait a little (the durable fallback for a crash before
	// the start, or a busy process) and start, called once tx commits,
	// starts the run in this process at once, under the same timeline lock
	// and claim as the job's worker (trigger: the run's message, so it is
	// not read again). Otherwise start is nil and the job runs as
	// EnqueueRunTx's does.
	StartRunTx(ctx context.Context, tx Tx, run Run) (start func(ctx context.Context, trigger Message), err error)
}

// CompactionQueue schedules a context scope's compaction as a job of its
// own, so it never holds the timeline's next message.
type CompactionQueue interface {
	// EnqueueCompaction schedules the compaction of (timeline, scope) in a
	// transaction of its own. While one for the same timeline and scope is
	// waiting or running, it does nothing.
	EnqueueCompaction(ctx context.Context, timelineScope, scope string) error
	// EnqueueCompactionTx is EnqueueCompaction in tx.
	EnqueueCompactionTx(ctx context.Context, tx Tx, timelineScope, scope string) error
}

// CompactionExecutor runs the compaction jobs. The caller holds the
// (timeline, scope) compaction lock, so no other compaction of that scope
// runs at once on any instance.
type CompactionExecutor interface {
	// ExecuteCompaction compacts one context scope of a timeline ("main":
	// every summary scope main prompts read). A failed summary moves
	// nothing and is told to the owner once (notice keyed by key); only
	// storage errors are returned (the job is retried).
	ExecuteCompaction(ctx context.Context, timelineScope, scope, key string) error
}

// RunExecutor executes runs for the queue's workers.
type RunExecutor interface {
	// ExecuteClaimed takes a run the queue claimed (RunStore.ClaimNextRun:
	// it is running) to its end (ok, error, timeout, cancelled), recording
	// its steps and answer. trigger, when not nil, is the run's message
	// (the caller holds it), so it is not read again.
	ExecuteClaimed(ctx context.Context, run Run, trigger *Message) error
	// InterruptRun closes a run whose worker died mid-run as interrupted and
	// tells the user.
	InterruptRun(ctx context.Context, run Run) error
}

// ToolCall is one tool call a model asked for. It is stored in the step
// rows' metadata with these (untagged) field names.
type ToolCall struct {
	// ID is the provider's call id, echoed back in the tool message.
	ID   string
	Name string
	// Arguments is a JSON object, so callers may unmarshal it directly:
	// when the model sent arguments that are not one, the provider sets
	// Arguments to {} and keeps what it sent in Malformed.
	Arguments json.RawMessage
	// Malformed is the model's raw arguments (cut to a few hundred bytes)
	// when they were not a JSON object; the call is then not executed and
	// the model gets a tool result naming the problem.
	Malformed string `json:",omitempty"`
}

// TokenUsage is the token accounting the provider reported for one call.
type TokenUsage struct {
	// PromptTokens counts every input token, cached ones included (for
	// Anthropic: input + cache read + cache write), so it is comparable
	// across providers and with the context window.
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is the part of PromptTokens read from the prompt cache.
	CachedTokens int
	// CacheWriteTokens is the part of PromptTokens written to the prompt
	// cache (Anthropic only).
	CacheWriteTokens int
}

// StepOrigin marks the steps of delegated work (a sub-agent's, or a task
// run inline in main); a main run's steps carry neither.
type StepOrigin struct {
	Child  bool `json:"child,omitempty"`
	Inline bool `json:"inline,omitempty"`
	// Schedule marks a step of a schedule's fire.
	Schedule bool `json:"schedule,omitempty"`
	// TaintedBy is the origin that had tainted the run when the step was
	// recorded ("" while untainted).
	TaintedBy string `json:"tainted_by,omitempty"`
}

// ModelCallStep is the payload of a model_call step.
type ModelCallStep struct {
	Model      string     `json:"model"`
	StopReason string     `json:"stop_reason"`
	Usage      TokenUsage `json:"usage"`
	TextChars  int        `json:"text_chars"`
	ToolCalls  int        `json:"tool_calls"`
	StepOrigin
}

// ToolCallStep is the payload of a tool_call step.
type ToolCallStep struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	StepOrigin
}

// ToolResultStep is the payload of a tool_result step (the result itself
// is the hidden tool row; the step records its outcome and size).
type ToolResultStep struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	IsError bool   `json:"is_error"`
	Code    string `json:"code"`
	Chars   int    `json:"chars"`
	StepOrigin
}

// ErrorStep is the payload of an error step: why the run failed.
type ErrorStep struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	StepOrigin
}

// RunRequest is the exact body of one model request a run sent (the JSON
// the provider put on the wire), gzip-compressed: run_requests, one
// row per recorded model call.
type RunRequest struct {
	ID            int64
	RunID         int64
	StepID        int64
	StepIndex     int
	TimelineScope string
	ContextScope  string
	Provider      string
	Model         string
	URL           string
	// Bytes is the body's size; Gzip the body compressed (empty in
	// listings, which leave bodies out).
	Bytes     int
	Gzip      []byte
	CreatedAt time.Time
}

// RunRequestQuery selects stored requests, newest first: those of one run,
// or of one (timeline, context scope).
type RunRequestQuery struct {
	RunID         int64
	TimelineScope string
	ContextScope  string
	BeforeID      int64
	Limit         int
}

// RunRequests keeps each run's exact model requests (AGENT_REQUEST_RETENTION).
type RunRequests interface {
	// AppendStepWithRequest records a step (a model call, or its error)
	// and the request behind it in one statement.
	AppendStepWithRequest(ctx context.Context, runID int64, kind StepKind, payload json.RawMessage, req RunRequest) (Step, error)
	// ListRunRequests lists requests without their bodies, newest first.
	ListRunRequests(ctx context.Context, q RunRequestQuery) ([]RunRequest, error)
	// GetRunRequest returns one request with its body; ENOTFOUND when
	// absent (or deleted by retention).
	GetRunRequest(ctx context.Context, id int64) (RunRequest, error)
	// PruneRunRequests deletes requests stored before t; it returns how many.
	PruneRunRequests(ctx context.Context, before time.Time) (int64, error)
}

// TurnStopper stops the run a message triggered, as /stop stops a
// timeline's runs: a queued run ends cancelled before it starts, a running
// one is cancelled and keeps the text it had written. The OpenAI-compatible
// channel calls it when its only listener goes away.
type TurnStopper interface {
	StopTurn(ctx context.Context, timeline string, triggerID int64, why string) error
}
