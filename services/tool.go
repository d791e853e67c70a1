package services

import (
	"context"
	"encoding/json"
	"strings"
)

// ToolSpec is a tool as the model sees it: its name, what it does and the
// JSON Schema of its arguments (an object schema; empty: no arguments). The
// providers send it natively and the prompt's stable prefix hashes it.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is hashed in canonical form (object keys sorted,
	// insignificant whitespace removed), so two encodings of one schema
	// hash alike.
	Parameters json.RawMessage
}

// ToolInfo is one tool the main agent has, as GET /api/tools and /tools
// show it.
type ToolInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Source is "builtin" or the name of the MCP server the tool comes from.
	Source string `json:"source"`
	// State is the state of its source: "ready", or for an MCP server
	// "starting" or "down" (a call then fails at once with an error the
	// model can act on).
	State string `json:"state"`
}

// ToolServerInfo is one configured MCP server.
type ToolServerInfo struct {
	Name string `json:"name"`
	// Transport is "stdio" or "http".
	Transport string `json:"transport"`
	State     string `json:"state"`
	// Error is why the server is down, when it is.
	Error string `json:"error,omitempty"`
	Tools int    `json:"tools"`
	// Restarts counts the times the server was started again after it
	// ended or failed to start.
	Restarts int `json:"restarts"`
}

// ToolCatalog lists the tools and the MCP servers of the service.
type ToolCatalog interface {
	ToolCatalog() ([]ToolInfo, []ToolServerInfo)
}

// ToolUse is one tool call of a run as the chat shows it under the answer
// it led to: live from EventTool, and from the stored steps afterwards.
type ToolUse struct {
	// ID is the provider's call id.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arg is a short form of the arguments (a path, a query, a task).
	Arg string `json:"arg,omitempty"`
	// Status is "running", "ok" or "error" (then Code says which).
	Status     string `json:"status"`
	Code       string `json:"code,omitempty"`
	DurationMS int64  `json:"ms,omitempty"`
}

// ToolActivity reads the tool calls of runs from their steps.
type ToolActivity interface {
	// ToolActivity returns the tool calls of each run, in call order.
	ToolActivity(ctx context.Context, runIDs []int64) (map[int64][]ToolUse, error)
}

// argKeys are the arguments that say best what a call was about.
var argKeys = []string{"path", "query", "task", "url", "message", "key", "text", "name"}

// ToolArg is the short form of a call's arguments shown beside its name:
// the first telling string argument, else the arguments as JSON, cut at 60
// characters.
func ToolArg(arguments json.RawMessage) string {
	var m map[string]json.RawMessage
	s := ""
	if json.Unmarshal(arguments, &m) == nil {
		for _, k := range argKeys {
			var v string
			if json.Unmarshal(m[k], &v) == nil && v != "" {
				s = v
				break
			}
		}
		if s == "" && len(m) > 0 {
			s = string(arguments)
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}

// Image is a picture a tool returned (an MCP server's image content), or
// one an API client sent with its message (TurnRequest.Images). It reaches
// a model that reads images (LLM_IMAGES=1) as an image part; otherwise only
// text describes it.
type Image struct {
	MIMEType string `json:"mime_type"`
	Data     []byte `json:"data"`
}

// ToolResultView is one tool call's result as the owner's chat page shows
// it: the text the model read, with the service's secrets masked, cut at
// a size a page shows (Chars is the whole length), and the images the tool
// returned (attachments of the result's row).
type ToolResultView struct {
	RunID     int64        `json:"run_id"`
	CallID    string       `json:"call_id"`
	Tool      string       `json:"tool"`
	IsError   bool         `json:"is_error"`
	Content   string       `json:"content"`
	Chars     int          `json:"chars"`
	Truncated bool         `json:"truncated"`
	Images    []Attachment `json:"-"`
}

// ToolResults reads tool calls' results for the owner's pages.
type ToolResults interface {
	// ToolResult returns the result of call callID of run runID in
	// timeline; ENOTFOUND when the run has no such result (yet).
	ToolResult(ctx context.Context, timeline string, runID int64, callID string) (ToolResultView, error)
}
