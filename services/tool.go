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
