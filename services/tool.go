package services

import "encoding/json"

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
