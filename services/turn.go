package services

import "encoding/json"

// TurnRequest is what an inbound message asks of the turn it starts besides
// its text: the per-request settings an OpenAI-compatible client sent
// (channel api). It travels in the message's metadata (MessageMeta.Request),
// so the worker that runs the turn reads it from the database like the text.
// Zero fields leave the agent's own settings.
type TurnRequest struct {
	// Instruction is the client's system (or developer) message: added to
	// the system prompt of this turn only.
	Instruction string `json:"instruction,omitempty"`
	// MaxTokens bounds each model reply of the turn (0: the default).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature is the sampling temperature (nil: the provider default).
	Temperature *float64 `json:"temperature,omitempty"`
	// Stop sequences end a model reply where they appear (at most 4).
	Stop []string `json:"stop,omitempty"`
	// ResponseFormat asks for a JSON answer (nil: text).
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// Images go to the model with the message's text, as image parts, when
	// the model reads images; they are used for this turn only (later
	// prompts carry the text).
	Images []Image `json:"images,omitempty"`
}

// Response format types (OpenAI's response_format.type).
const (
	ResponseText       = "text"
	ResponseJSONObject = "json_object"
	ResponseJSONSchema = "json_schema"
)

// ResponseFormat is the shape the answer must have: a JSON object, or JSON
// valid against Schema (a JSON Schema).
type ResponseFormat struct {
	Type string `json:"type"`
	// Name, Description, Schema and Strict are OpenAI's json_schema fields.
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}
