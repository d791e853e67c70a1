package prompt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// DefaultSystemPrompt is the main agent's system prompt. It is constant (no
// dates, no counters) so the stable prefix stays cacheable.
const DefaultSystemPrompt = `You are the owner's assistant in Switchboard. The owner talks to you from Telegram, a web page and a terminal; all of it is one conversation. Answer directly and concisely. Use the workspace tools to read and write files when a task needs them; say what you changed.`

// Workspace is the read access the ContextManager needs to a timeline's
// files (rules file, references, todo list). Paths are confined to the
// timeline's workspace by the implementation.
type Workspace interface {
	// ReadFile reads a file of the timeline's workspace.
	ReadFile(timelineScope, path string) ([]byte, error)
	// RootFiles lists the names of the files at the workspace's root.
	RootFiles(timelineScope string) ([]string, error)
	// FileStamp is a file's size and modification time: the todo recap's
	// files are read again only when they change, not on every build.
	FileStamp(timelineScope, path string) (size int64, mtime time.Time, err error)
}

// Deps are the Manager's collaborators: the stores and workspace a build
// reads, the tokenizer, the summariser compaction writes with, the clock
// and the logger. Store is required; an optional collaborator left nil
// turns off what it backs.
type Deps struct {
	Store services.ChatStore
	// Context holds segments, rules and remembered settings (nil: none).
	Context services.ContextStore
	// Workspace gives the rules file, references and todo list (nil: none).
	Workspace Workspace
	// Manifests read each timeline's context manifest, whose pins main
	// prompts include in the retrieved layer (nil: none).
	Manifests services.ContextManifests
	// Budgets hold each timeline's budget profile, the layers' shares and
	// minimums (nil: the default profile).
	Budgets services.ContextBudgets
	// Sources read what a build reads besides its history (budget
	// profile, rules, settings, summary and segments) in one statement
	// (nil: each is read on its own from Budgets and Context). Give it
	// only when it reads the stores Context and Budgets are (the
	// PostgreSQL store is all three).
	Sources services.PromptSourceReader
	// Tokenizer counts tokens of text not counted when stored (default
	// HeuristicTokenizer); New remembers its counts (Memo).
	Tokenizer Tokenizer
	// Recall finds the handoffs of earlier sub-agents for the retrieved
	// layer (nil: none are retrieved).
	Recall services.RecallStore
	// HistoryRule returns a tool's rule for keeping its results in history
	// (the tool registry's); tools without one get DefaultCompressionRule.
	HistoryRule func(toolName string) (CompressionRule, bool)
	// Attachments are the files that came with messages (nil: none): each
	// user message carries a line per file (Attachment.Describe), in
	// history too. Media reads the current input's images, which go to the
	// model as images when Config.Images is set and count in the input's
	// tokens; history keeps the lines only.
	Attachments services.AttachmentStore
	Media       services.Media
	// Summariser writes compaction's summaries (see compact.go); nil turns
	// compaction off.
	Summariser llm.Provider
	// OnCompaction, when set, hears "ok", "skipped", "failed" or
	// "free_form" per scope compacted (metrics).
	OnCompaction func(result string)
	// Now is the clock the current input's date and time come from
	// (default time.Now; tests fix it so prompts are deterministic).
	Now    func() time.Time
	Logger *slog.Logger
}

// Config are the Manager's settings: what cmd/switchboard maps the env
// table to (ContextConfig), plus the model's window, which app.New takes
// from the provider, and SystemPrompt, which no variable sets.
type Config struct {
	// SystemPrompt defaults to DefaultSystemPrompt.
	SystemPrompt string
	// Window is the model's context window (LLM_CONTEXT_WINDOW through the
	// provider; default 128000); OutputReserve is kept free for the answer
	// (default: a quarter of the window, at most 8192).
	Window        int
	OutputReserve int
	// HistoryTokens is the working set: the tokens of recent whole turns
	// history keeps above the last Compaction.KeepTurns turns (and the
	// current one), however large the window (CONTEXT_HISTORY_TOKENS;
	// default DefaultHistoryTokens, negative: the window alone bounds
	// history). Summary segments get at most half of it. Compaction
	// triggers on it (WorkingSetFull), so older turns leave the prompt
	// as summaries and stay reachable through recall.
	HistoryTokens int
	// ScopedRead selects the read path: the main scope's rows and summary
	// (AGENT_CONTEXT_SCOPED_READ=1) or the timeline's visible rows and the
	// global summary (legacy).
	ScopedRead bool
	// MaxConcurrentBuilds per timeline; more get CONTEXT_BACKPRESSURE (default 4).
	MaxConcurrentBuilds int
	// Images (LLM_IMAGES: the model reads them) sends the current input's
	// images to the model as images (Deps.Media reads them).
	Images bool
	// Location is the owner's time zone (OWNER_TIMEZONE) the date and time
	// of the current input and the summariser's timestamps are written in
	// (default: the server's zone).
	Location *time.Location
	// Compaction settings; see compact.go.
	Compaction CompactionConfig
}

// options are what the Manager reads: its collaborators and settings.
type options struct {
	Deps
	Config
}

// Manager compiles prompts from stored state.
type Manager struct {
	opts options
	log  *slog.Logger

	mu        sync.Mutex
	building  map[string]int    // timeline -> builds in flight
	lastHash  map[string]string // timeline/scope -> prefix hash of the previous build
	lastCut   map[string]int64  // timeline/scope -> first history turn kept when history was trimmed
	history   historyCache      // rows of recent builds, per timeline and read scope
	recap     recapFiles        // the todo recap's files, by size and modification time
	compactMu sync.Mutex
}

// New returns a Manager built from its collaborators and settings, the
// defaults filled in. Errors: d.Store is nil.
func New(d Deps, cfg Config) (*Manager, error) {
	if d.Store == nil {
		return nil, errors.New("prompt: Store is required")
	}
	if cfg.SystemPrompt == "" {
		cfg.SystemPrompt = DefaultSystemPrompt
	}
	if d.Tokenizer == nil {
		d.Tokenizer = HeuristicTokenizer{}
	}
	d.Tokenizer = Memo(d.Tokenizer)
	if cfg.Window <= 0 {
		cfg.Window = 128000
	}
	if cfg.OutputReserve <= 0 {
		cfg.OutputReserve = min(cfg.Window/4, 8192)
	}
	if cfg.MaxConcurrentBuilds <= 0 {
		cfg.MaxConcurrentBuilds = 4
	}
	cfg.Compaction.defaults()
	if cfg.HistoryTokens == 0 {
		cfg.HistoryTokens = DefaultHistoryTokens
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: options{Deps: d, Config: cfg}, log: log, building: map[string]int{}, lastHash: map[string]string{}, lastCut: map[string]int64{}}, nil
}

// DefaultHistoryTokens is the default working set (CONTEXT_HISTORY_TOKENS).
const DefaultHistoryTokens = 12000

// Budget is the prompt's token budget: window minus output reserve.
func (m *Manager) Budget() int { return m.opts.Window - m.opts.OutputReserve }

// Window is the model's context window.
func (m *Manager) Window() int { return m.opts.Window }

// ReadScope is the summary scope main prompts read under the flags.
func (m *Manager) ReadScope(contextScope string) string {
	if m.opts.ScopedRead {
		return contextScope
	}
	return services.GlobalSummaryScope
}

// BuildParams select what to compile.
type BuildParams struct {
	TimelineScope string
	ContextScope  string
	// TriggerID is the user message being answered: history ends with it.
	// Zero previews the next prompt (no current input).
	TriggerID int64
	// Trigger, when set, is the message TriggerID names, already read.
	Trigger *services.Message
	Tools   []services.ToolSpec
	// Deferred lists the tools not loaded (tools.Toolbox.Groups), part of
	// the stable prefix after the system prompt; "" when none is deferred.
	Deferred string
	// Retrieved are extra items for the retrieved layer (handoffs), each
	// with a score; lowest scores are trimmed first.
	Retrieved []RetrievedItem
	// Explain fills the inspection's layer texts and sources (the preview).
	Explain bool
}

// RetrievedItem is one entry of the retrieved layer.
type RetrievedItem struct {
	TimelineScope string
	Kind          string // "handoff", "reference"
	Title         string
	Text          string
	Score         float64
	// TaintedBy: the item was written under taint (its sources).
	TaintedBy string
	// Untrusted: the item's text is itself untrusted (an uploaded file a
	// reference or a pin includes): its origin, as the owner is shown it.
	Untrusted string
}

// LayerReport is one layer of the inspection record.
type LayerReport struct {
	Layer   Layer  `json:"layer"`
	Tokens  int    `json:"tokens"`
	Budget  int    `json:"budget"`
	Items   int    `json:"items"`
	Trimmed int    `json:"trimmed,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Text is what the layer put in the prompt (only when explained).
	Text string `json:"text,omitempty"`
}

// SourceReport is one source of a layer in an explained inspection: a
// tool, a rule, a setting, a pin, a handoff, a reference, the summaries, a
// turn; its tokens, and whether it made it into the prompt and why not.
type SourceReport struct {
	Layer    Layer  `json:"layer"`
	Source   string `json:"source"`
	Tokens   int    `json:"tokens"`
	Included bool   `json:"included"`
	Reason   string `json:"reason,omitempty"`
}

// Inspection explains a built prompt.
type Inspection struct {
	Layers          []LayerReport `json:"layers"`
	Warnings        []Warning     `json:"warnings,omitempty"`
	TotalTokens     int           `json:"total_tokens"`
	Budget          int           `json:"budget"`
	Window          int           `json:"window"`
	PrefixHash      string        `json:"prefix_hash"`
	PrefixUnchanged bool          `json:"prefix_unchanged"`
	ReadScope       string        `json:"read_scope"`
	CursorID        int64         `json:"cursor_id"`
	// BudgetVersion is the version of the budget profile the build used
	// (0: the default, none stored or the stored one not valid).
	BudgetVersion int `json:"budget_version,omitempty"`
	// WorkingSet is the tokens the history's turns (with the current
	// input) could take in this build: the kept turns plus HistoryTokens,
	// within the window. HistoryTurnTokens is what they took, HistoryTurns
	// how many past turns were sent and HistoryTrimmed how many older
	// turns since the summary cursor were left out.
	WorkingSet        int `json:"working_set,omitempty"`
	HistoryTurnTokens int `json:"history_turn_tokens,omitempty"`
	HistoryTurns      int `json:"history_turns,omitempty"`
	HistoryTrimmed    int `json:"history_trimmed,omitempty"`
	// Sources break each layer down by source (only when explained).
	Sources []SourceReport `json:"sources,omitempty"`
	// TaintedBy is set when the prompt carries text written under taint
	// (a history row or summary segment recording tainted_by, a retrieved
	// handoff): what the owner is shown ("after reading an earlier answer
	// written after reading http://…"). TaintSources are the untrusted
	// sources behind it, which the run's own rows record in turn. The run
	// starts tainted by it (docs/SECURITY.md, "Taint through history").
	TaintedBy    string `json:"tainted_by,omitempty"`
	TaintSources string `json:"taint_sources,omitempty"`
}

// Prompt is a provider-ready request plus its inspection record.
type Prompt struct {
	Request    llm.Request
	Inspection Inspection
	// Rules are the timeline's constraints as the build read them (the
	// rules layer's), when RulesRead: the run checks its answer against
	// these instead of reading them again.
	Rules     []services.Constraint
	RulesRead bool
}

func (m *Manager) enter(timeline string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.building[timeline] >= m.opts.MaxConcurrentBuilds {
		return services.CodedErrorf(CodeKind(CodeBackpressure), CodeBackpressure,
			"too many prompts are being built for this conversation at once (limit %d); retry shortly", m.opts.MaxConcurrentBuilds)
	}
	m.building[timeline]++
	return nil
}

func (m *Manager) leave(timeline string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.building[timeline]--; m.building[timeline] <= 0 {
		delete(m.building, timeline)
	}
}

// ToolTokens is what one tool definition costs a prompt, as Build counts
// it: its name, description and schema, and a few tokens of framing.
func ToolTokens(tok Tokenizer, t services.ToolSpec) int {
	return tok.Count(t.Name) + tok.Count(t.Description) + tok.Count(string(t.Parameters)) + 8
}

// stepCut trims history in steps, so the prompt's prefix stays the same for
// many turns: history that lost its oldest turn every turn would change
// the prefix every turn, and no provider's prompt cache would hold. When
// history does not fit, the oldest turns are left out until the rest fills
// at most three quarters of its budget, and that first kept turn stays the
// first while the turns after it fit; only then is a new cut made. The cut
// is remembered per scope in memory (a restart or another instance makes
// its own, the same way); a preview (record false) reads it but does not
// move it. The current turn (the last) is always kept.
func (m *Manager) stepCut(key string, turns []turn, trimmed, used, budget int, record bool) ([]turn, int, int) {
	m.mu.Lock()
	cut, had := m.lastCut[key]
	m.mu.Unlock()
	if trimmed == 0 || len(turns) < 2 {
		if record && had {
			m.mu.Lock()
			delete(m.lastCut, key)
			m.mu.Unlock()
		}
		return turns, trimmed, used
	}
	start := 0
	if had && cut >= turns[0].msgs[0].ID {
		for start < len(turns)-1 && turns[start].msgs[0].ID < cut {
			used -= turns[start].tokens
			start++
		}
	} else {
		for start < len(turns)-1 && used > budget*3/4 {
			used -= turns[start].tokens
			start++
		}
	}
	if record {
		m.mu.Lock()
		if len(m.lastCut) >= maxScopesRemembered {
			clear(m.lastCut) // each scope cuts afresh once
		}
		m.lastCut[key] = turns[start].msgs[0].ID
		m.mu.Unlock()
	}
	return turns[start:], trimmed + start, used
}

// maxScopesRemembered bounds the per-scope memory of prefix hashes and
// history cuts (an instance serving many timelines starts over).
const maxScopesRemembered = 4096

// SummaryPreamble opens the archived summary in the system content.
const SummaryPreamble = "Summary of the earlier conversation (archived by the service; the turns it covers are no longer shown):"

// InputHeader is the line the current input starts with in a prompt: the
// date and time now in the owner's zone, and the channel the message came
// through.
func (m *Manager) InputHeader(src services.Source) string {
	now := m.opts.Now().In(m.opts.Location)
	h := services.InputHeaderPrefix + now.Format("Monday 2006-01-02 15:04 MST")
	if name := m.opts.Location.String(); name != "Local" {
		h += " (" + name + ")"
	}
	h += "."
	if name := services.Sources[src]; name != "" {
		h += " This message came through " + name + "."
	} else if src != "" {
		h += " This message came through " + string(src) + "."
	}
	return h + "]"
}

// inputInHistory is the part of the turns' tokens that is the input
// itself, the current turn's user message: the input layer counts it
// (with the header of when and where it was sent), so the history layer
// does not.
func inputInHistory(p BuildParams, turns []turn) int {
	if p.TriggerID == 0 || len(turns) == 0 || turns[len(turns)-1].msgs[0].ID != p.TriggerID {
		return 0
	}
	return turns[len(turns)-1].head
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// violation logs and returns CONTEXT_SCOPE_VIOLATION for content of another
// timeline about to enter a prompt.
func (m *Manager) violation(p BuildParams, what, other string) error {
	m.log.Error("context scope violation refused", "code", CodeScopeViolation, "timeline", p.TimelineScope, "other_timeline", other, "what", what)
	return services.CodedErrorf(CodeKind(CodeScopeViolation), CodeScopeViolation, "%s belongs to another conversation and was refused", what)
}

func trimReason(n int, what string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d: %s", n, what)
}

// turn is one user message and everything that answered it.
type turn struct {
	msgs   []services.Message
	tokens int
	// head is the part of tokens that is the user message itself, with
	// its attachments' lines.
	head int
	// files are the user message's attachments.
	files []services.Attachment
}

// withFiles is a user message's text with a line per attachment.
func withFiles(text string, files []services.Attachment) string {
	for _, f := range files {
		if text != "" {
			text += "\n"
		}
		text += f.Describe()
	}
	return text
}

// images reads the input's images for a model that reads them, and
// estimates their tokens. An image that cannot be read stays a line.
func (m *Manager) images(ctx context.Context, timeline string, files []services.Attachment) ([]services.Image, int) {
	if !m.opts.Images || m.opts.Media == nil {
		return nil, 0
	}
	var out []services.Image
	tokens := 0
	for _, f := range files {
		if f.Kind != services.AttachImage {
			continue
		}
		data, err := m.opts.Media.Read(ctx, timeline, f.StorageKey)
		if err != nil {
			m.log.Warn("read an image for the prompt", "attachment_id", f.ID, "key", f.StorageKey, "err", err)
			continue
		}
		out = append(out, services.Image{MIMEType: f.MIMEType, Data: data})
		tokens += f.ImageTokens()
	}
	return out, tokens
}

// historyRule is the rule a tool's past results are compressed with.
func (m *Manager) historyRule(tool string) CompressionRule {
	if m.opts.HistoryRule != nil {
		if r, ok := m.opts.HistoryRule(tool); ok {
			return r
		}
	}
	return DefaultCompressionRule(tool)
}

// render turns stored rows into provider messages. Tool results of past
// turns are kept in their compressed history form, by their tool's rule.
func (t turn) render(current bool, rule func(tool string) CompressionRule) []llm.Message {
	var out []llm.Message
	args := map[string]string{} // a call's arguments, for its result's history form
	for _, m := range t.msgs {
		switch m.Role {
		case services.RoleUser:
			content := m.Content
			if m.ID == t.msgs[0].ID {
				content = withFiles(content, t.files)
			}
			out = append(out, llm.Message{Role: llm.RoleUser, Content: content})
		case services.RoleAssistant:
			meta := metaOf(m)
			for _, c := range meta.ToolCalls {
				args[c.ID] = string(c.Arguments)
			}
			out = append(out, llm.Message{Role: llm.RoleAssistant, Content: m.Content, ToolCalls: meta.ToolCalls})
		case services.RoleTool:
			meta := metaOf(m)
			content := m.Content
			if !current {
				content = HistoryForm(meta.ToolName, args[meta.ToolCallID], content, rule(meta.ToolName))
			}
			out = append(out, llm.Message{Role: llm.RoleTool, Content: content, ToolCallID: meta.ToolCallID, IsError: meta.IsError})
		}
	}
	return out
}

// historyTaint finds the first text of a prompt written under taint: an
// archived summary of tainted turns, a row of history a tainted run (or
// fire, or sub-agent) wrote, a retrieved handoff, or a todo recap file a
// tainted run wrote last. It returns what the
// owner is shown and the sources behind it; "" when the prompt carries
// none. The metadata was decoded to place the rows (metaOf remembers it):
// no query and no second decode.
func historyTaint(segs []services.Segment, turns []turn, triggerID int64, retrieved, todo string) (string, string) {
	for _, s := range segs {
		if s.TaintedBy != "" {
			return services.HistoryOrigin("the summary of earlier turns", s.TaintedBy).String(), s.TaintedBy
		}
	}
	for _, t := range turns {
		if t.msgs[0].ID != triggerID {
			// An earlier voice note's transcript is in history with its
			// message (Attachment.Describe): not the owner's typed words.
			for _, f := range t.files {
				if f.Kind.Transcribable() && f.Transcription != "" {
					o := services.Origin{Kind: services.OriginTranscript, Detail: f.DisplayName()}.String()
					return o, o
				}
			}
		}
		for _, m := range t.msgs {
			if m.ID == triggerID {
				continue // the current input: the owner's words (or a fire's, tainted at its start)
			}
			meta := metaOf(m)
			if meta.TaintedBy == "" {
				continue
			}
			what := "an earlier message"
			switch {
			case meta.Kind == services.MetaHandoff:
				what = "an earlier sub-agent handoff"
			case m.Role == services.RoleTool:
				what = "an earlier tool result"
			case m.Role == services.RoleAssistant && len(meta.ToolCalls) > 0:
				what = "an earlier tool call"
			case m.Role == services.RoleAssistant:
				what = "an earlier answer"
			}
			return services.HistoryOrigin(what, meta.TaintedBy).String(), meta.TaintedBy
		}
	}
	if retrieved != "" {
		return services.HistoryOrigin("a retrieved sub-agent handoff", retrieved).String(), retrieved
	}
	if todo != "" {
		return services.HistoryOrigin("the todo recap", todo).String(), todo
	}
	return "", ""
}

// OpenCallNote is the result a prompt gives a stored tool call that has
// none (data from before runs closed their open calls).
const OpenCallNote = `{"status":"interrupted","error":"This call has no result: its run ended before it finished."}`

// RepairToolCalls makes msgs obey the rule providers enforce: an assistant
// message with tool calls is followed by one tool message per call. A call
// without a result gets OpenCallNote, placed right after the results it has.
// Stored rows are not changed.
func RepairToolCalls(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		out = append(out, m)
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		answered := map[string]bool{}
		for i+1 < len(msgs) && msgs[i+1].Role == llm.RoleTool {
			i++
			answered[msgs[i].ToolCallID] = true
			out = append(out, msgs[i])
		}
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				out = append(out, llm.Message{Role: llm.RoleTool, Content: OpenCallNote, ToolCallID: c.ID, IsError: true})
			}
		}
	}
	return out
}

// promptable reports whether a stored row belongs in prompts: chat commands
// and the service's own notices do not.
func promptable(m services.Message) bool {
	if m.Source == services.SourceSystem {
		return false
	}
	meta := metaOf(m)
	// The visible marker of a handoff is for people; the main agent reads
	// the handoff itself (the delegate call's hidden result).
	if meta.Kind == services.MetaHandoff && m.Visible {
		return false
	}
	// A file the agent sent: its send_file result says so.
	if meta.Kind == services.MetaFileSent {
		return false
	}
	// The offline model's "configure a model" answers are for the owner.
	if meta.Notice == services.NoticeOfflineModel {
		return false
	}
	return meta.Command == ""
}

// historyRead is what recentTurns kept: the turns (oldest first), how many
// older ones were left out, their tokens, and the limit they were read
// within (the window's share, or the working set when it is smaller).
type historyRead struct {
	turns         []turn
	trimmed, used int
	limit         int
}

// recentTurns reads history backwards and keeps whole turns, newest first,
// while they fit: the last KeepTurns turns and the current one within
// budget (the window's share), older ones within the working set above
// them (HistoryTokens); the trigger's own turn always comes (or the input is too
// large). A turn is a user message and every row answering it: rows carry
// reply_to (the user message) because answers to a message can be stored
// after later user messages that arrived mid-run. Rows without it belong to
// the user message before them. User messages after the trigger (queued
// behind it) are left out. It returns the turns oldest first.
func (m *Manager) recentTurns(ctx context.Context, q services.ContextQuery, triggerID int64, budget int, timeline string, warns *warningSet) (historyRead, error) {
	if triggerID == 0 {
		triggerID = 1<<63 - 1 // preview: everything so far
	}
	tok := m.opts.Tokenizer
	q.BeforeID = 1<<63 - 1 // newest first: the repository pages backwards from here
	q.Limit = 200
	var kept []turn
	byTurn := map[int64][]services.Message{}
	var pending []services.Message
	used, trimmed := 0, 0
	limit := budget
	full := false
	cost := func(msg services.Message) int {
		n := msg.TokenCount
		if n == 0 {
			n = tok.Count(msg.Content)
		}
		return n + MessageOverhead + 1
	}
	for {
		page, err := m.history.page(ctx, m.opts.Store, q)
		if err != nil {
			return historyRead{}, err
		}
		files, err := m.filesOf(ctx, timeline, page)
		if err != nil {
			return historyRead{}, err
		}
		for i := len(page) - 1; i >= 0; i-- {
			msg := page[i]
			if msg.TimelineScope != timeline {
				m.log.Error("context scope violation refused", "code", CodeScopeViolation, "timeline", timeline, "message_id", msg.ID)
				warns.add(CodeScopeViolation, "a row of another conversation was refused")
				continue
			}
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
			t := turn{msgs: []services.Message{msg}, files: files[msg.ID]}
			if len(t.files) > 0 {
				t.head = tok.Count(withFiles("", t.files))
			}
			t.head += cost(msg)
			t.tokens = t.head
			rest := append(byTurn[msg.ID], pending...)
			delete(byTurn, msg.ID)
			pending = nil
			sort.Slice(rest, func(i, j int) bool { return rest[i].ID < rest[j].ID })
			t.msgs = append(t.msgs, rest...)
			for _, r := range rest {
				t.tokens += cost(r)
			}
			if msg.ID != triggerID {
				t.tokens += m.formGrowth(t, cost)
			}
			if full || used+t.tokens > limit {
				full = true
				trimmed++
				continue
			}
			kept = append(kept, t)
			used += t.tokens
			if len(kept) == m.opts.Compaction.KeepTurns+1 && m.opts.HistoryTokens > 0 {
				// The kept turns and the current one are in: older turns
				// fill the working set above them, not the window.
				limit = min(budget, used+m.opts.HistoryTokens)
			}
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
	return historyRead{turns: kept, trimmed: trimmed, used: used, limit: limit}, nil
}

// formGrowth is what a past turn's tool results take beyond their stored
// counts in their history forms: a write's or an edit's form quotes the
// call's first lines, which the result row does not hold. A form smaller
// than its row is counted at the row's count, as before.
func (m *Manager) formGrowth(t turn, cost func(services.Message) int) int {
	growth := 0
	args := map[string]string{}
	for _, r := range t.msgs {
		meta := metaOf(r)
		switch r.Role {
		case services.RoleAssistant:
			for _, c := range meta.ToolCalls {
				args[c.ID] = string(c.Arguments)
			}
		case services.RoleTool:
			rule := m.historyRule(meta.ToolName)
			if rule.Form == nil {
				continue
			}
			n := m.opts.Tokenizer.Count(HistoryForm(meta.ToolName, args[meta.ToolCallID], r.Content, rule)) + MessageOverhead + 1
			growth += max(n-cost(r), 0)
		}
	}
	return growth
}

// filesOf returns the attachments of a page's user messages.
func (m *Manager) filesOf(ctx context.Context, timeline string, page []services.Message) (map[int64][]services.Attachment, error) {
	if m.opts.Attachments == nil {
		return nil, nil
	}
	var ids []int64
	for _, msg := range page {
		if msg.Role == services.RoleUser && hasFiles(msg) {
			ids = append(ids, msg.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return m.opts.Attachments.AttachmentsOf(ctx, timeline, ids)
}

// hasFiles reports whether msg came with attachments: chat.Post names them
// in its metadata (files) in the transaction that links them, so a message
// without that list needs no look-up.
func hasFiles(msg services.Message) bool {
	meta := metaOf(msg)
	return len(meta.Files) > 0
}

// replyTo is the user message a stored row answers (0 when not recorded).
func replyTo(m services.Message) int64 {
	meta := metaOf(m)
	return meta.ReplyTo
}

// budgetProfile is the timeline's budget profile: the stored one, or the
// default when none is stored. A stored profile that is not valid, or that
// cannot be read, is not used: the build goes on with the default and a
// CONTEXT_BUDGET_FALLBACK warning naming the problem.
//
// src, when not nil, holds it as read.
func (m *Manager) budgetProfile(ctx context.Context, timeline string, src *services.PromptSources, warns *warningSet) services.ContextBudget {
	def := services.DefaultContextBudget()
	if m.opts.Budgets == nil {
		return def
	}
	var b services.ContextBudget
	var err error
	if src != nil {
		b, err = src.Budget, src.BudgetErr
	} else {
		b, err = m.opts.Budgets.ContextBudget(ctx, timeline)
	}
	if err == nil && b.Validate() != nil {
		err = b.Validate()
	}
	if err != nil {
		if services.ErrorCode(err) == CodeBudgetFallback {
			warns.add(CodeBudgetFallback, "%s", services.ErrorMessage(err))
		} else {
			warns.add(CodeBudgetFallback, "the budget profile could not be read, the default is used: %s", services.ErrorMessage(err))
		}
		return def
	}
	return b
}

// readSources reads what a build of (timeline, scope) reads besides its
// history in one statement, with Sources; nil without them, or when that
// read fails (each part is then read on its own, and fails or is skipped
// as it would).
func (m *Manager) readSources(ctx context.Context, timeline, scope string) *services.PromptSources {
	if m.opts.Sources == nil {
		return nil
	}
	src, err := m.opts.Sources.ReadPromptSources(ctx, timeline, scope)
	if err != nil {
		return nil
	}
	return &src
}

// sourceFailed records a source that failed: it is skipped with a
// CONTEXT_SOURCE_UNAVAILABLE warning naming it, and logged; the build goes
// on without it.
func (m *Manager) sourceFailed(warns *warningSet, p BuildParams, source, what string, err error) {
	m.log.Warn("prompt source unavailable", "code", CodeSourceUnavailable, "timeline", p.TimelineScope, "scope", p.ContextScope, "source", source, "err", err)
	warns.add(CodeSourceUnavailable, "%s could not be read, %s: %s", source, what, services.ErrorMessage(err))
}
