// Package wire is the protocol between the server and its clients (the chat
// page, the TUI, API clients and the tests): the JSON shapes of timeline
// messages, pages and websocket frames. It is not the internal event format
// that crosses instances (services.Event): the server translates, so either
// side can change without the other.
//
// Websocket protocol (JSON text frames).
//
// Client → server:
//
//	{"type":"post","content":"…","client_key":"…","source":"tui"}   store a message
//
// Server → client:
//
//	{"type":"message","message":{…}}      a timeline message, in id order, each once
//	{"type":"ready","last_id":N}           the backlog after ?after= has been sent
//	{"type":"event","event":{…}}           a transient event (run status, streamed text)
//	{"type":"error","error":"…","code":"…","client_key":"…"}   a rejected post
//	                                       (retry_after: seconds, when rate limited)
//
// Connect with ?after=<last seen id> to receive every message after it
// before live ones; without it only live messages follow. When the server
// closes with StatusSlowConsumer the client reconnects with its last id.
package wire

import (
	"encoding/json"
	"time"
)

// Frame types.
const (
	FramePost    = "post"
	FrameMessage = "message"
	FrameReady   = "ready"
	FrameEvent   = "event"
	FrameError   = "error"
)

// StatusSlowConsumer is the websocket close code of a connection that fell
// behind; the client reconnects with ?after=<last id>.
const StatusSlowConsumer = 4008

// Message is a timeline message as the API and the websocket send it.
type Message struct {
	ID        int64           `json:"id"`
	Timeline  string          `json:"timeline"`
	Role      string          `json:"role"`
	Source    string          `json:"source"`
	Content   string          `json:"content"`
	AgentID   string          `json:"agent_id,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	// HTML is an answer's Markdown rendered and sanitised by the server
	// (empty for the owner's own messages, and for an answer too long to
	// render: show Content as text then).
	HTML string `json:"html,omitempty"`
	// ReplyTo is the id of the message an answer replies to.
	ReplyTo int64 `json:"reply_to,omitempty"`
	// Tools are the tool calls of the run that wrote an answer.
	Tools []ToolUse `json:"tools,omitempty"`
	// Attachments are the files that came with the message (or that the
	// agent sent), each with its download URL.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Approval is the approval a notice asks for or reports the decision
	// of, as it stands when the message is sent.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is a tool call held for the owner's decision: decide it with
// POST /api/approvals/{id} {"decision":"approve"|"deny"}.
type Approval struct {
	ID     int64  `json:"id"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the call's JSON arguments, the service's secrets masked.
	Arguments string `json:"arguments"`
	Effect    string `json:"effect"`
	// TaintedBy is the origin that tainted the run ("after reading …").
	TaintedBy string `json:"tainted_by,omitempty"`
	// State is pending, approved, denied, timed_out, cancelled, executing,
	// executed or interrupted; DecidedBy the channel that decided.
	State     string `json:"state"`
	DecidedBy string `json:"decided_by,omitempty"`
}

// Attachment is a file of a message. URL downloads it (owner only).
type Attachment struct {
	ID       int64  `json:"id"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	MIMEType string `json:"mime_type"`
	Size     int64  `json:"size"`
	Width    int    `json:"width,omitempty"`
	Height   int    `json:"height,omitempty"`
	Duration int    `json:"duration,omitempty"`
	// Path is where the file is in the workspace (what the agent reads).
	Path string `json:"path"`
	// Transcription is a voice note's text, once transcribed.
	Transcription string `json:"transcription,omitempty"`
	URL           string `json:"url"`
}

// ToolUse is one tool call of a run: in Message.Tools, and as the data of
// an event of type "tool" while the run works.
type ToolUse struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Arg    string `json:"arg,omitempty"`
	Status string `json:"status"` // running, ok or error
	Code   string `json:"code,omitempty"`
	MS     int64  `json:"ms,omitempty"`
}

// Page is GET /api/timeline's body.
type Page struct {
	Messages []Message `json:"messages"`
	HasOlder bool      `json:"has_older"`
}

// Event types sent in event frames.
const (
	EventRun   = "run"
	EventDelta = "delta"
	EventTool  = "tool"
	// EventTranscript: a file of message ID got its transcript; read the
	// message again.
	EventTranscript = "transcript"
)

// Event is a transient event: a run's status or streamed answer text.
type Event struct {
	Type     string          `json:"t"`
	Timeline string          `json:"tl,omitempty"`
	ID       int64           `json:"id,omitempty"`
	RunID    int64           `json:"run,omitempty"`
	Data     json.RawMessage `json:"d,omitempty"`
}

// RunData is the payload of a run event.
type RunData struct {
	Status string `json:"status"`
}

// DeltaData is the payload of a delta event.
type DeltaData struct {
	Text string `json:"text"`
}

// Frame is one websocket frame in either direction.
type Frame struct {
	Type    string   `json:"type"`
	Message *Message `json:"message,omitempty"`
	Event   *Event   `json:"event,omitempty"`
	LastID  int64    `json:"last_id,omitempty"`
	Error   string   `json:"error,omitempty"`
	// Code is an error frame's machine-readable kind (RATE_LIMITED, …);
	// RetryAfter the seconds to wait before posting again.
	Code       string `json:"code,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	// Post frames.
	Content   string `json:"content,omitempty"`
	ClientKey string `json:"client_key,omitempty"`
	Source    string `json:"source,omitempty"`
}

// PostRequest is the body of POST /api/messages.
type PostRequest struct {
	Content string `json:"content"`
	// Source is the sending client: web (default) or tui.
	Source string `json:"source,omitempty"`
	// ClientKey makes a retried POST store one message (idempotency key).
	ClientKey string `json:"client_key,omitempty"`
}

// PostResponse is POST /api/messages' body.
type PostResponse struct {
	Message Message `json:"message"`
	Created bool    `json:"created"`
}

// Pairing is a Telegram user's pairing as the owner sees it. Pending
// pairings do not show their code: the owner types the code the user was
// given, so nobody is approved by a stray click.
type Pairing struct {
	UserID   int64  `json:"user_id"`
	Name     string `json:"name"`
	Timeline string `json:"timeline"`
	// Code is a pending request's code (what the stranger was given), for
	// the owner's Approve and Deny; empty once approved.
	Code       string     `json:"code,omitempty"`
	ExpiresAt  time.Time  `json:"expires_at"`
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
}

// Pairings is GET /api/pairings's body.
type Pairings struct {
	Enabled  bool      `json:"enabled"`
	Pending  []Pairing `json:"pending"`
	Approved []Pairing `json:"approved"`
}

// ToolResult is GET /api/runs/:run/tools/:call's body: what one tool call
// returned, as the chat page shows it under its line. Content is the text
// the model read with the service's secrets masked ([secret]), cut at
// 8 KiB when Truncated (Chars is the whole length, in characters); Images
// are the images the tool returned (an MCP screenshot), served like other
// attachments.
type ToolResult struct {
	RunID     int64        `json:"run_id"`
	CallID    string       `json:"call_id"`
	Tool      string       `json:"tool"`
	IsError   bool         `json:"is_error"`
	Content   string       `json:"content"`
	Chars     int          `json:"chars"`
	Truncated bool         `json:"truncated"`
	Images    []Attachment `json:"images"`
}
