package services

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// ScheduleKind is how a schedule's fire times are written.
type ScheduleKind string

// Schedule kinds.
const (
	// ScheduleAt fires once, at an RFC 3339 time.
	ScheduleAt ScheduleKind = "at"
	// ScheduleEvery fires at a fixed interval ("30m").
	ScheduleEvery ScheduleKind = "every"
	// ScheduleCron fires on a 5-field cron expression in the schedule's zone.
	ScheduleCron ScheduleKind = "cron"
)

// NotifyPolicy says when a fire's result reaches the owner.
type NotifyPolicy string

// Notify policies.
const (
	// NotifyAlways: every fire posts its message (reminders).
	NotifyAlways NotifyPolicy = "always"
	// NotifyOnFinding: a fire posts only when it found something.
	NotifyOnFinding NotifyPolicy = "on_finding"
	// NotifyOnChange: a fire posts only when its finding differs from the
	// last one posted (monitors).
	NotifyOnChange NotifyPolicy = "on_change"
)

// ScheduleState is where a schedule is.
type ScheduleState string

// Schedule states. A deleted schedule is kept (its fires and their steps
// stay readable on the debug page) but never fires and is not listed.
const (
	ScheduleActive  ScheduleState = "active"
	SchedulePaused  ScheduleState = "paused"
	ScheduleDone    ScheduleState = "done"
	ScheduleDeleted ScheduleState = "deleted"
)

// ScheduleAgent is the agent id of the runs schedules fire: such a run has
// no parent but is not a main run (it holds no timeline lock; see
// Run.IsMain).
const ScheduleAgent = "schedule"

// MetaScheduleNotice marks a schedule's notification (MessageMeta.Kind).
const MetaScheduleNotice = "schedule"

// NothingNew is what a fire answers when it has nothing to tell the owner.
const NothingNew = "NOTHING_NEW"

// Schedule is a task the agent runs on its own time (schedules).
type Schedule struct {
	ID            int64        `json:"id"`
	TimelineScope string       `json:"-"`
	Name          string       `json:"name"`
	Task          string       `json:"task"`
	Kind          ScheduleKind `json:"kind"`
	Spec          string       `json:"spec"`
	Timezone      string       `json:"timezone"`
	Notify        NotifyPolicy `json:"notify"`
	Profile       string       `json:"profile,omitempty"`
	// Watch, when set, is the content each fire checks without the model
	// first: an unchanged fire ends without a model call.
	Watch *Watch        `json:"watch,omitempty"`
	State ScheduleState `json:"state"`
	// StateReason says why a schedule was paused by the service.
	StateReason string     `json:"state_reason,omitempty"`
	NextFireAt  *time.Time `json:"next_fire_at"`
	LastFireAt  *time.Time `json:"last_fire_at"`
	// LastStatus is how the last fire ended; LastNotified is the last
	// message posted to the owner (what on_change compares with).
	LastStatus   string `json:"last_status,omitempty"`
	LastNotified string `json:"last_notified,omitempty"`
	Failures     int    `json:"consecutive_failures"`
	// WatchHash is the hash of the watched content the last fire that ran
	// the model (or found it unchanged) saw; WatchText that content
	// (normalised, bounded), the "previous" of the next change.
	WatchHash string    `json:"watch_hash,omitempty"`
	WatchText string    `json:"-"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Scope is the context scope the schedule's fires run in.
func (s Schedule) Scope() string { return ScheduleScope(s.ID) }

// ScheduleScope is the context scope of schedule id: "sched:<id>".
func ScheduleScope(id int64) string { return "sched:" + strconv.FormatInt(id, 10) }

// FireStatus is where one fire is.
type FireStatus string

// Fire statuses.
const (
	FireRunning     FireStatus = "running"
	FireOK          FireStatus = "ok"
	FireError       FireStatus = "error"
	FireInterrupted FireStatus = "interrupted"
	// FireSkipped: the fire did not run its task (a daily budget refused
	// its model call); not a failure.
	FireSkipped FireStatus = "skipped"
	// FireUnchanged: a watch fire found its content as the last fire saw
	// it and ended without a model call.
	FireUnchanged FireStatus = "unchanged"
)

// Fire receipts: how a fire ended, as the owner reads it (/schedules, the
// API): ran the model, found the watched content unchanged, ran once for
// fire times missed while the service was down, was skipped (and why), or
// failed (and why).
const (
	ReceiptRan       = "ran"
	ReceiptUnchanged = "unchanged"
	ReceiptCaughtUp  = "caught_up"
	ReceiptSkipped   = "skipped"
	ReceiptFailed    = "failed"
	ReceiptRunning   = "running"
)

// Watch is what a monitor checks before its model runs: a page (URL),
// optionally narrowed to the elements a CSS selector picks, or a read-only
// MCP tool called with fixed arguments; optionally narrowed to the text a
// pattern matches, with ignore patterns removed (counters, timestamps).
type Watch struct {
	URL string `json:"url,omitempty"`
	// Tool is a read-only MCP tool (its registry name, "server__tool")
	// called with Arguments instead of fetching a URL.
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Selector is a CSS selector: only the matching elements count.
	Selector string `json:"selector,omitempty"`
	// Pattern is a regular expression (RE2): only the text it matches
	// counts, every match on a line of its own.
	Pattern string `json:"pattern,omitempty"`
	// Ignore are regular expressions whose matches are removed before the
	// content is compared.
	Ignore []string `json:"ignore,omitempty"`
}

// WatchContent is a watch's content as read by a fire: normalised text
// (readable text, spacing, ignore patterns) and its hash.
type WatchContent struct {
	URL  string
	Text string
	Hash string
	// Truncated: Text was cut to the reader's limit (Hash covers it all).
	Truncated bool
}

// Watcher reads watched content without the model, through the fetch
// guard (services/fetch).
type Watcher interface {
	// ValidateWatch checks a watch; EINVALID names what is wrong.
	ValidateWatch(w Watch) error
	// ReadWatch fetches and normalises a URL watch's content.
	ReadWatch(ctx context.Context, w Watch) (WatchContent, error)
	// NormaliseWatch normalises text read for w from source (a tool
	// watch's result) as ReadWatch does a page's.
	NormaliseWatch(w Watch, source, text string) (WatchContent, error)
}

// Target names what a watch reads: its URL, or its tool and arguments.
func (w Watch) Target() string {
	if w.Tool == "" {
		return w.URL
	}
	if len(w.Arguments) == 0 {
		return w.Tool + "()"
	}
	return w.Tool + "(" + string(w.Arguments) + ")"
}

// ScheduleFire is one due fire of a schedule (schedule_fires): at most one
// row per (schedule, fire time), which is what makes a fire run once.
type ScheduleFire struct {
	ID         int64      `json:"id"`
	ScheduleID int64      `json:"schedule_id"`
	FireAt     time.Time  `json:"fire_at"`
	RunID      int64      `json:"run_id,omitempty"`
	Attempts   int        `json:"attempts"`
	Status     FireStatus `json:"status"`
	Notified   bool       `json:"notified"`
	MessageID  int64      `json:"message_id,omitempty"`
	// Result is the fire's answer (NothingNew when it had nothing to say).
	Result     string     `json:"result,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Tokens (prompt and completion) and ModelCalls the fire spent.
	Tokens     int `json:"tokens"`
	ModelCalls int `json:"model_calls"`
	// Missed is how many fire times passed while this fire waited (the
	// service was down): it ran once for them.
	Missed int `json:"missed,omitempty"`
	// ContentHash is the watched content's hash this fire read.
	ContentHash string `json:"content_hash,omitempty"`
}

// Receipt is how the fire ended for the owner (Receipt* constants) and,
// for a skipped or failed one, why.
func (f ScheduleFire) Receipt() (receipt, why string) {
	switch f.Status {
	case FireRunning:
		return ReceiptRunning, ""
	case FireUnchanged:
		return ReceiptUnchanged, ""
	case FireSkipped:
		return ReceiptSkipped, strings.TrimPrefix(f.Error, "skipped: ")
	case FireOK:
		if f.Missed > 0 {
			return ReceiptCaughtUp, ""
		}
		return ReceiptRan, ""
	}
	return ReceiptFailed, f.Error
}

// MarshalJSON adds the receipt and its why to a fire's fields.
func (f ScheduleFire) MarshalJSON() ([]byte, error) {
	type plain ScheduleFire
	r, why := f.Receipt()
	return json.Marshal(struct {
		plain
		Receipt string `json:"receipt"`
		Why     string `json:"why,omitempty"`
	}{plain(f), r, why})
}

// ScheduleStore persists schedules and their fires.
type ScheduleStore interface {
	// CreateSchedule stores s (ID, version and times are set).
	CreateSchedule(ctx context.Context, s Schedule) (Schedule, error)
	// GetSchedule returns one schedule; ENOTFOUND when absent.
	GetSchedule(ctx context.Context, id int64) (Schedule, error)
	// ListSchedules lists a timeline's schedules (deleted ones only with
	// withDeleted; timeline "" lists every timeline's), oldest first.
	ListSchedules(ctx context.Context, timeline string, withDeleted bool) ([]Schedule, error)
	// LockActiveSchedules makes the caller's transaction the only one
	// deciding about timeline's active schedules until it ends (a count of
	// them and the insert or change it allows are one decision).
	LockActiveSchedules(ctx context.Context, timeline string) error
	// UpdateSchedule stores s if its stored version is still s.Version and
	// returns it with the next version; ECONFLICT when it changed meanwhile.
	UpdateSchedule(ctx context.Context, s Schedule) (Schedule, error)
	// InsertFire records the start of a fire; ECONFLICT when that fire
	// (schedule, time) already has a row.
	InsertFire(ctx context.Context, f ScheduleFire) (ScheduleFire, error)
	// GetFire returns the fire of a schedule at a time; ENOTFOUND when none.
	GetFire(ctx context.Context, scheduleID int64, at time.Time) (ScheduleFire, error)
	// UpdateFire stores a fire's progress or end.
	UpdateFire(ctx context.Context, f ScheduleFire) error
	// ListFires lists a schedule's fires, newest first.
	ListFires(ctx context.Context, scheduleID int64, limit int) ([]ScheduleFire, error)
	// RunningFires lists fires still marked running (their worker may have died).
	RunningFires(ctx context.Context) ([]ScheduleFire, error)
}

// ScheduleQueue schedules the durable job of one fire.
type ScheduleQueue interface {
	// EnqueueFireTx inserts, in tx, the job that fires schedule id at at.
	// The same (schedule, time) is inserted once, ever: a second insert
	// does nothing.
	EnqueueFireTx(ctx context.Context, tx Tx, scheduleID int64, at time.Time) error
}

// FireExecutor runs due fires for the queue's workers.
type FireExecutor interface {
	// ExecuteFire runs the fire of schedule id due at at, once: a fire
	// that already ran, or is not due any more (the schedule changed,
	// paused or ended), is left alone. The caller holds the schedule's
	// lock, so no other fire of the schedule runs meanwhile.
	ExecuteFire(ctx context.Context, scheduleID int64, at time.Time) error
	// InterruptFire closes a fire whose worker died mid-fire (the caller
	// holds the schedule's lock): the fire and its run end interrupted and
	// the fire is not run again.
	InterruptFire(ctx context.Context, f ScheduleFire) error
}

// ScheduleRequest is what the owner asks for when creating or changing a
// schedule (API, tools, commands). Exactly one of At, Every and Cron sets
// the time; on update, nil fields stay as they were.
type ScheduleRequest struct {
	Name     *string `json:"name,omitempty"`
	Task     *string `json:"task,omitempty"`
	At       *string `json:"at,omitempty"`
	Every    *string `json:"every,omitempty"`
	Cron     *string `json:"cron,omitempty"`
	Notify   *string `json:"notify,omitempty"`
	Timezone *string `json:"timezone,omitempty"`
	Profile  *string `json:"profile,omitempty"`
	// Watch sets what each fire checks before its model runs; on update a
	// watch with an empty URL removes it.
	Watch *Watch `json:"watch,omitempty"`
	// State pauses ("paused") or resumes ("active") on update.
	State *string `json:"state,omitempty"`
}

// ScheduleWithFires is a schedule and its latest fires.
type ScheduleWithFires struct {
	Schedule
	Fires []ScheduleFire `json:"fires"`
}

// Schedules is what the owner's controls (API, commands, tools) use.
type Schedules interface {
	// Create validates and stores a new schedule with its first fire's
	// job. EINVALID names what is wrong with the request (unknown zone,
	// cron syntax, a time in the past, below the minimum interval);
	// ECONFLICT when the timeline has its limit of active schedules.
	Create(ctx context.Context, timeline string, r ScheduleRequest) (Schedule, error)
	// Update changes a schedule of timeline; version 0 skips the version
	// check, a version that is not the stored one is ECONFLICT. ENOTFOUND
	// for another timeline's or a deleted schedule.
	Update(ctx context.Context, timeline string, id int64, version int, r ScheduleRequest) (Schedule, error)
	// Delete stops and hides a schedule of timeline (its fires stay
	// readable on the debug page). ENOTFOUND as Update.
	Delete(ctx context.Context, timeline string, id int64) (Schedule, error)
	// List returns timeline's schedules with up to fires of their last
	// fires each.
	List(ctx context.Context, timeline string, fires int) ([]ScheduleWithFires, error)
	// Get returns one schedule of timeline; ENOTFOUND for another
	// timeline's.
	Get(ctx context.Context, timeline string, id int64) (Schedule, error)
	// GetWithFires returns one schedule of timeline with up to fires of
	// its last fires (their receipts).
	GetWithFires(ctx context.Context, timeline string, id int64, fires int) (ScheduleWithFires, error)
}

// FireResult is how a fire's run ended, for the schedule's ledger.
type FireResult struct {
	// Status is FireOK or FireError (the run failed, timed out or used its
	// budget).
	Status FireStatus
	// Answer is the run's final answer (NothingNew: nothing to tell).
	Answer string
	// Error says why a failed fire failed.
	Error string
	// Tokens and ModelCalls the fire spent.
	Tokens, ModelCalls int
	// Watch is the content a watch fire read (nil: no watch, or it could
	// not be read); News is the model's structured verdict on its change.
	Watch *WatchContent
	News  bool
}

// FireDecision is what the ledger decided at a fire's end.
type FireDecision struct {
	// Notify: Message goes to the owner's timeline and channels.
	Notify  bool
	Message string
	// Paused: the fire was the last failure the schedule may have in a
	// row; the owner is told PauseNotice, once.
	Paused      bool
	PauseNotice string
}

// ScheduleFires is the ledger of fires the fire executor keeps, each call in
// the caller's transaction.
type ScheduleFires interface {
	// BeginFireTx records that the fire of schedule id due at at starts,
	// advances the schedule to its next fire time (the next one after now:
	// fires missed during downtime are caught up once, not one by one)
	// and enqueues that fire's job. ENOTFOUND when the fire is not due any
	// more; ECONFLICT when the schedule changed meanwhile (try again).
	BeginFireTx(ctx context.Context, tx Tx, id int64, at time.Time) (Schedule, ScheduleFire, error)
	// EndFireTx records how the fire ended, counts failures (pausing the
	// schedule after too many in a row) and applies the notify policy.
	// ECONFLICT when the schedule changed meanwhile (try again).
	// It returns the schedule and the fire as stored.
	EndFireTx(ctx context.Context, tx Tx, id int64, f ScheduleFire, r FireResult) (Schedule, ScheduleFire, FireDecision, error)
	// Location is the time zone a schedule's times are shown in.
	Location(s Schedule) *time.Location
}

// Notifier delivers a message nobody asked for (a schedule's notification)
// to the external channels of its timeline's person (the owner's Telegram
// chats; a Telegram user's own chat for "tg:<id>"), in tx, idempotently per
// message id.
type Notifier interface {
	NotifyOwnerTx(ctx context.Context, tx Tx, msg Message) error
}
