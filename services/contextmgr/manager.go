package contextmgr

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// DefaultSystemPrompt is the main agent's system prompt. It is constant (no
// dates, no counters) so the stable prefix stays cacheable.
const DefaultSystemPrompt = `You are the owner's assistant in Switchboard. The owner talks to you from Telegram, a web page and a terminal; all of it is one conversation. Answer directly and concisely. Use the workspace tools to read and write files when a task needs them; say what you changed.`

// Options configure a Manager.
type Options struct {
	Store services.ChatStore
	// Tokenizer counts tokens of text not counted when stored.
	Tokenizer Tokenizer
	// SystemPrompt defaults to DefaultSystemPrompt.
	SystemPrompt string
	// Window is the model's context window; OutputReserve is kept free for
	// the answer (default: a quarter of the window, at most 8192).
	Window        int
	OutputReserve int
	// ScopedRead selects the read path: the main scope's rows and summary
	// (AGENT_CONTEXT_SCOPED_READ=1) or the timeline's visible rows and the
	// global summary (legacy).
	ScopedRead bool
}

// Manager compiles prompts from stored state.
type Manager struct {
	opts Options
}

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.SystemPrompt == "" {
		opts.SystemPrompt = DefaultSystemPrompt
	}
	if opts.Tokenizer == nil {
		opts.Tokenizer = HeuristicTokenizer{}
	}
	if opts.Window <= 0 {
		opts.Window = 128000
	}
	if opts.OutputReserve <= 0 {
		opts.OutputReserve = min(opts.Window/4, 8192)
	}
	return &Manager{opts: opts}
}

// Budget is the prompt's token budget: window minus output reserve.
func (m *Manager) Budget() int { return m.opts.Window - m.opts.OutputReserve }

// Window is the model's context window.
func (m *Manager) Window() int { return m.opts.Window }

// BuildParams select what to compile.
type BuildParams struct {
	TimelineScope string
	ContextScope  string
	// TriggerID is the user message being answered: history ends with it.
	TriggerID int64
	Tools     []llm.ToolDef
}

// LayerReport is one layer of the inspection record.
type LayerReport struct {
	Layer   Layer  `json:"layer"`
	Tokens  int    `json:"tokens"`
	Items   int    `json:"items"`
	Trimmed int    `json:"trimmed,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Inspection explains a built prompt.
type Inspection struct {
	Layers      []LayerReport `json:"layers"`
	Warnings    []Warning     `json:"warnings,omitempty"`
	TotalTokens int           `json:"total_tokens"`
	Budget      int           `json:"budget"`
	Window      int           `json:"window"`
	PrefixHash  string        `json:"prefix_hash"`
	ReadScope   string        `json:"read_scope"`
	CursorID    int64         `json:"cursor_id"`
}

// Prompt is a provider-ready request plus its inspection record.
type Prompt struct {
	Request    llm.Request
	Inspection Inspection
}

// Build compiles the prompt of one turn. It returns CONTEXT_INPUT_TOO_LARGE
// (ETOOLARGE) when the current input alone cannot fit the budget.
func (m *Manager) Build(ctx context.Context, p BuildParams) (Prompt, error) {
	budget := m.Budget()
	ins := Inspection{Budget: budget, Window: m.opts.Window}
	tok := m.opts.Tokenizer

	systemTokens := tok.Count(m.opts.SystemPrompt)
	toolTokens := 0
	defs := make([]ToolDefinition, 0, len(p.Tools))
	for _, t := range p.Tools {
		toolTokens += tok.Count(t.Name) + tok.Count(t.Description) + tok.Count(string(t.JSONSchema))
		defs = append(defs, ToolDefinition{Name: t.Name, Description: t.Description, Parameters: t.JSONSchema})
	}
	ins.PrefixHash = PrefixHash(PrefixParts{System: m.opts.SystemPrompt, Tools: defs})
	ins.Layers = append(ins.Layers, LayerReport{Layer: LayerSystem, Tokens: systemTokens + toolTokens, Items: 1 + len(p.Tools)})

	readScope := services.GlobalSummaryScope
	q := services.ContextQuery{TimelineScope: p.TimelineScope, ByTimelineOnly: true}
	if m.opts.ScopedRead {
		readScope = p.ContextScope
		q = services.ContextQuery{TimelineScope: p.TimelineScope, ContextScope: p.ContextScope}
	}
	ins.ReadScope = readScope
	summary, err := m.opts.Store.GetSummary(ctx, p.TimelineScope, readScope)
	if err != nil && !services.IsKind(err, services.ENOTFOUND) {
		return Prompt{}, err
	}
	q.AfterID = summary.UntilMessageID
	ins.CursorID = summary.UntilMessageID

	remaining := budget - systemTokens - toolTokens
	// The summary of archived history comes first.
	var summaryMsgs []llm.Message
	if strings.TrimSpace(summary.SummaryText) != "" {
		text := "Summary of the earlier conversation:\n" + summary.SummaryText
		n := tok.CountMessage("user", text)
		summaryMsgs = append(summaryMsgs, llm.Message{Role: llm.RoleUser, Content: text},
			llm.Message{Role: llm.RoleAssistant, Content: "Understood."})
		remaining -= n + 4
		ins.Layers = append(ins.Layers, LayerReport{Layer: LayerHistory, Tokens: n + 4, Items: 1, Reason: "summary"})
	}

	turns, trimmed, used, err := m.recentTurns(ctx, q, p.TriggerID, remaining)
	if err != nil {
		return Prompt{}, err
	}
	if len(turns) == 0 {
		return Prompt{}, services.CodedErrorf(services.ETOOLARGE, CodeInputTooLarge,
			"the message is too long for the model's context window (%d tokens of budget left after the system prompt)", remaining)
	}
	input := turns[len(turns)-1]
	inputTokens := input.tokens
	ins.Layers = append(ins.Layers,
		LayerReport{Layer: LayerHistory, Tokens: used - inputTokens, Items: len(turns) - 1, Trimmed: trimmed, Reason: trimReason(trimmed)},
		LayerReport{Layer: LayerInput, Tokens: inputTokens, Items: 1})

	msgs := append([]llm.Message{}, summaryMsgs...)
	for i, t := range turns {
		msgs = append(msgs, t.render(i == len(turns)-1)...)
	}
	total := systemTokens + toolTokens + used
	for _, l := range ins.Layers {
		if l.Reason == "summary" {
			total += l.Tokens
		}
	}
	ins.TotalTokens = total
	return Prompt{
		Request:    llm.Request{System: m.opts.SystemPrompt, CacheSystem: true, Messages: msgs, Tools: p.Tools},
		Inspection: ins,
	}, nil
}

func trimReason(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d older turn(s) left out to fit the budget", n)
}

// turn is one user message and everything that answered it.
type turn struct {
	msgs   []services.Message
	tokens int
}

// render turns stored rows into provider messages. Tool results of past
// turns are kept in their compressed history form.
func (t turn) render(current bool) []llm.Message {
	var out []llm.Message
	for _, m := range t.msgs {
		switch m.Role {
		case services.RoleUser:
			out = append(out, llm.Message{Role: llm.RoleUser, Content: m.Content})
		case services.RoleAssistant:
			var meta stepMeta
			_ = json.Unmarshal(m.Metadata, &meta)
			out = append(out, llm.Message{Role: llm.RoleAssistant, Content: m.Content, ToolCalls: meta.ToolCalls})
		case services.RoleTool:
			var meta stepMeta
			_ = json.Unmarshal(m.Metadata, &meta)
			content := m.Content
			if !current {
				content = Compress(meta.ToolName, content, DefaultCompressionRule(meta.ToolName))
			}
			out = append(out, llm.Message{Role: llm.RoleTool, Content: content, ToolCallID: meta.ToolCallID, IsError: meta.IsError})
		}
	}
	return out
}

// stepMeta is the metadata the runner stores on hidden step messages.
type stepMeta struct {
	Command    string         `json:"command"`
	ToolCalls  []llm.ToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	ToolName   string         `json:"tool_name"`
	IsError    bool           `json:"is_error"`
}

// promptable reports whether a stored row belongs in prompts: chat commands
// and the service's own notices do not.
func promptable(m services.Message) bool {
	if m.Source == services.SourceSystem {
		return false
	}
	var meta stepMeta
	_ = json.Unmarshal(m.Metadata, &meta)
	return meta.Command == ""
}

// recentTurns reads history backwards and keeps whole turns, newest first,
// while they fit; the trigger's own turn always comes (or the input is too
// large). A turn is a user message and every row answering it: rows carry
// reply_to (the user message) because answers to a message can be stored
// after later user messages that arrived mid-run. Rows without it belong to
// the user message before them. User messages after the trigger (queued
// behind it) are left out. It returns the turns oldest first.
func (m *Manager) recentTurns(ctx context.Context, q services.ContextQuery, triggerID int64, budget int) ([]turn, int, int, error) {
	tok := m.opts.Tokenizer
	q.BeforeID = 0
	q.Limit = 200
	var kept []turn
	byTurn := map[int64][]services.Message{}
	var pending []services.Message
	used, trimmed := 0, 0
	full := false
	cost := func(msg services.Message) int {
		n := msg.TokenCount
		if n == 0 {
			n = tok.Count(msg.Content)
		}
		return n + MessageOverhead + 1
	}
	for {
		page, err := m.opts.Store.ListContext(ctx, q)
		if err != nil {
			return nil, 0, 0, err
		}
		for i := len(page) - 1; i >= 0; i-- {
			msg := page[i]
			if !promptable(msg) {
				continue
			}
			if msg.Role != services.RoleUser {
				if to := replyTo(msg); to != 0 {
					if to <= triggerID {
						byTurn[to] = append(byTurn[to], msg)
					}
				} else if msg.ID < triggerID {
					pending = append(pending, msg)
				}
				continue
			}
			if msg.ID > triggerID {
				continue
			}
			t := turn{msgs: []services.Message{msg}}
			rest := append(byTurn[msg.ID], pending...)
			delete(byTurn, msg.ID)
			pending = nil
			sort.Slice(rest, func(i, j int) bool { return rest[i].ID < rest[j].ID })
			t.msgs = append(t.msgs, rest...)
			for _, r := range t.msgs {
				t.tokens += cost(r)
			}
			if full || used+t.tokens > budget {
				full = true
				trimmed++
				continue
			}
			kept = append(kept, t)
			used += t.tokens
		}
		if len(page) < q.Limit || full {
			break
		}
		q.BeforeID = page[0].ID
	}
	// Oldest first.
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	if len(kept) > 0 && kept[len(kept)-1].msgs[0].ID != triggerID {
		// The trigger's own turn did not fit: the input is too large.
		return nil, trimmed, 0, nil
	}
	return kept, trimmed, used, nil
}

// replyTo is the user message a stored row answers (0 when not recorded).
func replyTo(m services.Message) int64 {
	var meta struct {
		ReplyTo int64 `json:"reply_to"`
	}
	_ = json.Unmarshal(m.Metadata, &meta)
	return meta.ReplyTo
}
