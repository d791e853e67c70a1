// Package tui is Switchboard's terminal channel: a bubbletea client of a
// running server's REST and websocket API (docs/API.md). It never touches the
// database or the services; it speaks the same protocol as the chat page.
//
// The package has three parts that only meet through tea.Msg values:
//   - Client: REST calls and the websocket dial (client.go);
//   - Feed: one goroutine that keeps a websocket open, reconnects with
//     backoff and turns frames into messages for the model (feed.go);
//   - Model: the bubbletea model, which renders the timeline and can be
//     driven in tests by plain messages (model.go, render.go).
package tui

import (
	"encoding/json"
	"time"
)

// Message is a timeline message as the API sends it.
type Message struct {
	ID        int64           `json:"id"`
	Timeline  string          `json:"timeline"`
	Role      string          `json:"role"`
	Source    string          `json:"source"`
	Content   string          `json:"content"`
	AgentID   string          `json:"agent_id,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// messageMeta is the part of a message's metadata the TUI reads.
type messageMeta struct {
	RunID   int64  `json:"run_id"`
	Kind    string `json:"kind"`
	AgentID string `json:"agent_id"`
}

func (m Message) meta() messageMeta {
	var md messageMeta
	if len(m.Metadata) > 0 {
		_ = json.Unmarshal(m.Metadata, &md) // metadata is advisory; a bad one renders plainly
	}
	return md
}

// Page is a page of the timeline (GET /api/timeline).
type Page struct {
	Messages []Message `json:"messages"`
	HasOlder bool      `json:"has_older"`
}

// Event is a transient event: run status or streamed answer text.
type Event struct {
	Type          string          `json:"t"`
	TimelineScope string          `json:"tl,omitempty"`
	ID            int64           `json:"id,omitempty"`
	RunID         int64           `json:"run,omitempty"`
	Data          json.RawMessage `json:"d,omitempty"`
}

// Event types the TUI renders.
const (
	EventRun   = "run"
	EventDelta = "delta"
)

// runData is the payload of a "run" event.
type runData struct {
	Status string `json:"status"`
}

// deltaData is the payload of a "delta" event.
type deltaData struct {
	Text string `json:"text"`
}

// frame is one websocket frame in either direction.
type frame struct {
	Type      string   `json:"type"`
	Message   *Message `json:"message,omitempty"`
	Event     *Event   `json:"event,omitempty"`
	LastID    int64    `json:"last_id,omitempty"`
	Error     string   `json:"error,omitempty"`
	Content   string   `json:"content,omitempty"`
	ClientKey string   `json:"client_key,omitempty"`
	Source    string   `json:"source,omitempty"`
}

// SourceTUI is the source every message sent from the terminal carries.
const SourceTUI = "tui"

// Run statuses sent in run events.
const (
	RunQueued      = "queued"
	RunRunning     = "running"
	RunOK          = "ok"
	RunError       = "error"
	RunTimeout     = "timeout"
	RunCancelled   = "cancelled"
	RunInterrupted = "interrupted"
)
