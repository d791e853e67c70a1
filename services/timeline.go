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

// Source is the channel a message came through, or the internal writer.
type Source string

// Message sources (channels and internal writers).
const (
	SourceTelegram Source = "telegram"
	SourceWeb      Source = "web"
	SourceTUI      Source = "tui"
	SourceAPI      Source = "api"
	SourceSystem   Source = "system"
	SourceAgent    Source = "agent"
	// SourceSchedule is a scheduled task's notification to the owner.
	SourceSchedule Source = "schedule"
)

// Sources are the sources a message may have (ChatService refuses
// others), each with how a prompt names the channel a message came
// through ("": it is not named). A new channel is a line here.
var Sources = map[Source]string{
	SourceTelegram: "Telegram",
	SourceWeb:      "the web chat page",
	SourceTUI:      "the terminal UI",
	SourceAPI:      "the HTTP API (a program or script: REST or OpenAI-compatible)",
	SourceSystem:   "",
	SourceAgent:    "the main agent, which delegated this task",
	SourceSchedule: "a schedule (the service, on the owner's behalf)",
}

// Role is who wrote a message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleTool      Role = "tool"
)

// Message is one row of chat_messages: a user-visible timeline entry
// (Visible) or an internal step of an agent's context scope.
type Message struct {
	ID            int64
	TimelineScope string
	ContextScope  string
	AgentID       string
	Role          Role
	Source        Source
	Content       string
	Visible       bool
	// Metadata is the row's metadata as stored (what clients are sent).
	Metadata json.RawMessage
	// Meta is Metadata decoded, once, by the store that read the row
	// (empty when it does not decode).
	Meta MessageMeta
	// Command is the chat command a user message's text is, as parsed
	// when it was posted: set on the message the post returns, nil on a
	// row read back (Meta.Command names its command).
	Command    *ParsedCommand
	DedupeKey  string
	TokenCount int
	CreatedAt  time.Time
}

// NewMessage is what InsertMessage stores. Empty TimelineScope and
// ContextScope take the column defaults ('global', 'main'), which is what
// legacy callers relied on.
type NewMessage struct {
	TimelineScope string
	ContextScope  string
	AgentID       string
	Role          Role
	Source        Source
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
	// ToolResultMessage returns the hidden row holding the result of tool
	// call callID of run runID in timeline; ENOTFOUND when there is none.
	ToolResultMessage(ctx context.Context, timeline string, runID int64, callID string) (Message, error)
}

// PostParams is one inbound (or agent-written) visible message.
type PostParams struct {
	TimelineScope string
	Source        Source
	// Role defaults to user.
	Role    Role
	Content string
	// DedupeKey makes a retried delivery return the stored row (created=false).
	DedupeKey string
	Metadata  json.RawMessage
	// AgentID marks a message written by an agent.
	AgentID string
	// ReplyTo is the id of the message this one answers; its channel's
	// ReplyRouter (if any) delivers this message there.
	ReplyTo int64
	// ReplyToMessage, when the caller holds it, is the message ReplyTo
	// names, so routing the reply does not read it again.
	ReplyToMessage *Message
	// NotifyOwner delivers the message to the external channels of its
	// timeline's person (the owner's Telegram chats; a Telegram user's own
	// chat) although it answers nothing there: a schedule's notification.
	NotifyOwner bool
	// Attachments are files saved with Media.Save, linked to the message in
	// its transaction (a duplicate post links nothing again). A message
	// with attachments may have no text.
	Attachments []Attachment
	// Command is the chat command Content is, when the channel parsed it
	// already (a zero Name: none); nil: the post parses Content itself.
	// Either way a user message's text is parsed once, when it is posted.
	Command *ParsedCommand
}

// MessageMeta is the one encoding of chat_messages.metadata: what a row is
// besides its text. Writers set the fields they know and store Encode();
// readers use Message.Meta, decoded when the row was read. A new kind of message is a new field here.
// NoticeOfflineModel marks an answer of the offline model (how to configure
// a real one): shown to the owner, never sent to a model.
const NoticeOfflineModel = "offline_model"

type MessageMeta struct {
	// RunID is the run that wrote the row (answers, notices, steps).
	RunID int64 `json:"run_id,omitempty"`
	// ReplyTo is the id of the message this one answers.
	ReplyTo int64 `json:"reply_to,omitempty"`
	// Command is the chat command a user message is ("status", …).
	Command string `json:"command,omitempty"`
	// Kind marks a special row: MetaHandoff, MetaTaskPayload.
	Kind string `json:"kind,omitempty"`
	// ChildRunID and AgentID are the sub-agent run a handoff comes from
	// and its agent.
	ChildRunID int64  `json:"child_run_id,omitempty"`
	AgentID    string `json:"agent_id,omitempty"`
	// HandoffStatus is how that sub-agent run ended (a handoff's marker).
	HandoffStatus RunStatus `json:"status,omitempty"`
	// RunStatus is how the run ended, on the notice that says so.
	RunStatus RunStatus `json:"run_status,omitempty"`
	// Notice names a notice that is not an answer (e.g. "compaction_failed").
	Notice string `json:"notice,omitempty"`
	// PairingCode is the code of the pairing a "pairing" notice asks the
	// owner to decide, or a "pairing_decided" notice reports.
	PairingCode string `json:"pairing_code,omitempty"`
	// ToolCalls are the calls of an assistant step.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID, ToolName and IsError describe a tool result row.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// ScheduleID and ScheduleName name the schedule a notification comes
	// from (Kind MetaScheduleNotice), or whose fire a hidden row belongs to.
	ScheduleID   int64  `json:"schedule_id,omitempty"`
	ScheduleName string `json:"schedule_name,omitempty"`
	// ClosedBy is the end of the run that closed a tool call left open.
	ClosedBy RunStatus `json:"closed_by,omitempty"`
	// Files are the message's attachments as they were stored with it (the
	// attachments table has their ids and transcripts): what a delivery
	// sends and a page shows without another read.
	Files []FileRef `json:"files,omitempty"`
	// Truncated marks an answer whose model reply stopped at its token
	// bound (max_tokens), not at its end.
	Truncated bool `json:"truncated,omitempty"`
	// Request is what an inbound message asks of its turn besides its text
	// (an API client's settings); nil: nothing.
	Request *TurnRequest `json:"request,omitempty"`
	// ErrorCode is the error code of the failure a notice reports (e.g.
	// "LLM_UNREACHABLE"); ModelStatus the model server's HTTP status (0:
	// none arrived) and ModelTimeout whether the model call timed out;
	// RetryAfterMS the wait the model server asked for.
	ErrorCode    string `json:"error_code,omitempty"`
	ModelStatus  int    `json:"model_status,omitempty"`
	ModelTimeout bool   `json:"model_timeout,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	// ApprovalID is the approval a notice asks for or reports the
	// decision of (channels may render Approve / Deny buttons).
	ApprovalID int64 `json:"approval_id,omitempty"`
	// TaintedBy marks a row written under taint: by a run (or fire, or
	// sub-agent) that had read untrusted text when it wrote the row; it
	// names the untrusted sources ("after reading http://…"). A later
	// prompt that carries the row starts its run tainted (docs/SECURITY.md,
	// "Taint through history"). The owner's own messages never carry it.
	TaintedBy string `json:"tainted_by,omitempty"`
	// Telegram is where a Telegram message came from (flattened: the keys
	// stand at the top level of the JSON).
	TelegramMeta
}

// TelegramMeta is the Telegram origin of an inbound message.
type TelegramMeta struct {
	ChatID           int64  `json:"chat_id,omitempty"`
	ChatType         string `json:"chat_type,omitempty"`
	MessageID        int    `json:"message_id,omitempty"`
	FromID           int64  `json:"from_id,omitempty"`
	FromUsername     string `json:"from_username,omitempty"`
	ReplyToMessageID int    `json:"reply_to_message_id,omitempty"`
	UpdateID         int64  `json:"update_id,omitempty"`
	Edited           bool   `json:"edited,omitempty"`
	EditDate         int    `json:"edit_date,omitempty"`
	Caption          bool   `json:"caption,omitempty"`
	Media            string `json:"media,omitempty"`
}

// Kinds of special rows (MessageMeta.Kind).
const (
	MetaHandoff     = "handoff"
	MetaTaskPayload = "task_payload"
	// MetaFileSent is a file the agent sent with send_file: shown and
	// delivered, never part of a prompt (the tool's result says it).
	MetaFileSent = "file_sent"
)

// FileRef is an attachment as a message's metadata names it.
type FileRef struct {
	Kind     AttachmentKind `json:"kind"`
	Name     string         `json:"name,omitempty"`
	MIMEType string         `json:"mime_type"`
	Size     int64          `json:"size"`
	Key      string         `json:"key"`
	Width    int            `json:"width,omitempty"`
	Height   int            `json:"height,omitempty"`
	Duration int            `json:"duration,omitempty"`
}

// Ref is the attachment as metadata names it.
func (a Attachment) Ref() FileRef {
	return FileRef{Kind: a.Kind, Name: a.DisplayName(), MIMEType: a.MIMEType, Size: a.Size, Key: a.StorageKey,
		Width: a.Width, Height: a.Height, Duration: a.Duration}
}

// Encode is the stored JSON of m.
func (m MessageMeta) Encode() json.RawMessage {
	b, err := json.Marshal(m)
	if err != nil { // only plain fields: cannot happen
		panic(err)
	}
	return b
}

// DecodeMeta reads a row's metadata. Rows written before a field existed
// decode with it zero; a malformed one decodes as empty with an error.
func DecodeMeta(raw json.RawMessage) (MessageMeta, error) {
	var m MessageMeta
	if len(raw) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return MessageMeta{}, Errorf(EINVALID, "message metadata: %v", err)
	}
	return m, nil
}

// TimelinePage is a page of a timeline and whether older rows exist.
type TimelinePage struct {
	Messages  []Message
	HasOlder  bool
	NewestID  int64
	OldestID  int64
	Timeline  string
	PageLimit int
}

// ChatService is the one entry for messages from every channel into a
// timeline, and the timeline reads channels use (services/chat).
type ChatService interface {
	// Post validates and stores a visible message and publishes it after
	// commit; a new user message also starts the agent's turn. A duplicate
	// (same DedupeKey) returns the first row with created=false.
	Post(ctx context.Context, p PostParams) (msg Message, created bool, err error)
	// Timeline returns visible messages: after afterID (ascending), or the
	// newest page before beforeID (0 = the latest).
	Timeline(ctx context.Context, timeline string, beforeID, afterID int64, limit int) (TimelinePage, error)
	// TimelineAfter returns the first limit visible messages after
	// afterID, ascending; afterID 0 reads from the beginning.
	TimelineAfter(ctx context.Context, timeline string, afterID int64, limit int) (TimelinePage, error)
}
