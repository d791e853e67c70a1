package openai

// The JSON the channel answers with, in OpenAI's shapes. Fields keep the
// order the answers have always had (completions and chunks: alphabetical
// by JSON name), so an answer is the same byte for byte.

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ModelList is GET /v1/models.
type ModelList struct {
	Data   []Model `json:"data"`
	Object string  `json:"object"` // "list"
}

// Completion is a chat.completion: the answer of a request without stream.
type Completion struct {
	Choices []Choice `json:"choices"`
	Created int64    `json:"created"`
	ID      string   `json:"id"`
	Model   string   `json:"model"`
	Object  string   `json:"object"` // "chat.completion"
	Usage   Usage    `json:"usage"`
}

// Choice is a completion's one choice.
type Choice struct {
	FinishReason string    `json:"finish_reason"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"` // always null
	Message      Message   `json:"message"`
}

// Message is the assistant's answer in a Choice.
type Message struct {
	Content string  `json:"content"`
	Refusal *string `json:"refusal"` // always null
	Role    string  `json:"role"`    // "assistant"
}

// Chunk is one chat.completion.chunk of a stream. The usage chunk has no
// choices (an empty array) and a usage; every other chunk one choice and no
// usage.
type Chunk struct {
	Choices []ChunkChoice `json:"choices"`
	Created int64         `json:"created"`
	ID      string        `json:"id"`
	Model   string        `json:"model"`
	Object  string        `json:"object"` // "chat.completion.chunk"
	Usage   *Usage        `json:"usage,omitempty"`
}

// ChunkChoice is a chunk's choice: a piece of the answer (Delta) and, in
// the last one, why it ended.
type ChunkChoice struct {
	Delta        Delta     `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"` // always null
}

// Delta is what a chunk adds: the role (first chunk), text, or nothing
// (the chunk with finish_reason).
type Delta struct {
	Content *string `json:"content,omitempty"`
	Role    string  `json:"role,omitempty"`
}

// Usage is OpenAI's usage object.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ErrorBody is OpenAI's error shape, the body of every error under /v1 and
// the data of a stream's `event: error`.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what failed: an empty param is null; code is never
// empty.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
