package prompt

import (
	"context"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/markdown"
)

// build is one Build in progress: what each step found, allocated and
// assembled, for the next step to use.
type build struct {
	p BuildParams
	// src, when not nil, is what the build reads besides history, read in
	// one statement (readSources); nil: each part is read on its own.
	src *services.PromptSources
	// constraints, when constraintsRead, are the rules layer's rules as read.
	constraints     []services.Constraint
	constraintsRead bool
	ins             Inspection
	warns           warningSet
	tok             Tokenizer
	budget          int
	profile         services.ContextBudget

	// gather: every layer at full size.
	baseSystem                       string
	systemTokens                     int
	defs                             []services.ToolSpec
	rules, settings, retrieved, todo textLayer
	inputText                        string
	inputContent                     string
	inputImages                      []services.Image
	inputTokens                      int
	cursor                           int64
	segments                         []services.Segment

	// allocate: each layer cut to its share, history read into the rest.
	alloc                                            map[Layer]int
	rulesText, settingsText, retrievedText, todoText string
	rulesTrim, settingsTrim, retrievedTrim, todoTrim int
	rulesOut                                         []bool
	rulesBudget                                      int
	historyBudget                                    int
	segKept                                          []services.Segment
	segTrim, segUsed                                 int
	turns                                            []turn
	turnTrim, turnUsed                               int

	// assemble: the request's parts.
	system, systemContext string
	msgs                  []llm.Message
	cacheAt               []int
}

// Build compiles the prompt of one turn: system and tools, rules, settings
// (these three are the stable prefix, sent as the system prompt so
// providers can cache it), history (summary segments as system content
// after the prefix, then whole recent turns), then what changes every
// turn: retrieved, current input (with @path reminders), todo recap. The
// ends of the last two past turns are the request's cache points. The total never exceeds the budget. Errors:
// CONTEXT_INPUT_TOO_LARGE (ETOOLARGE) when the input alone cannot fit,
// CONTEXT_BACKPRESSURE (ERATELIMITED) when too many builds run for the
// timeline.
//
// It runs in four steps: gather every layer at full size, allocate the
// budget among them (reading history into what is left), assemble the
// request, and inspect (the record of what each layer took and why).
func (m *Manager) Build(ctx context.Context, p BuildParams) (Prompt, error) {
	if err := m.enter(p.TimelineScope); err != nil {
		return Prompt{}, err
	}
	defer m.leave(p.TimelineScope)

	b := &build{p: p, budget: m.Budget(), tok: m.opts.Tokenizer}
	b.ins = Inspection{Budget: b.budget, Window: m.opts.Window}
	b.src = m.readSources(ctx, p.TimelineScope, m.ReadScope(p.ContextScope))
	b.profile = m.budgetProfile(ctx, p.TimelineScope, b.src, &b.warns)
	b.ins.BudgetVersion = b.profile.Version
	if err := m.gather(ctx, b); err != nil {
		return Prompt{}, err
	}
	if err := m.allocate(ctx, b); err != nil {
		return Prompt{}, err
	}
	m.assemble(b)
	m.inspect(b)
	if p.TriggerID != 0 && (len(b.turns) == 0 || b.turns[len(b.turns)-1].msgs[0].ID != p.TriggerID) {
		return Prompt{}, services.CodedErrorf(services.ETOOLARGE, CodeInputTooLarge,
			"the message is too long for the model's context window (%d tokens of budget left)", b.historyBudget)
	}
	return Prompt{
		Request: llm.Request{System: b.system, SystemContext: b.systemContext, CacheSystem: true, CacheAt: b.cacheAt,
			Messages: b.msgs, Tools: p.Tools},
		Inspection: b.ins,
		Rules:      b.constraints, RulesRead: b.constraintsRead,
	}, nil
}

// gather reads every layer at full size: the system prompt (with the
// deferred tools' groups) and tools, rules, settings, the current input
// (with its files, images and header), retrieved, todo, and the summary
// cursor with its segments.
func (m *Manager) gather(ctx context.Context, b *build) error {
	p, tok := b.p, b.tok
	b.baseSystem = m.opts.SystemPrompt
	if p.Deferred != "" {
		b.baseSystem += "\n\n" + p.Deferred
	}
	b.systemTokens = tok.Count(b.baseSystem)
	b.defs = make([]services.ToolSpec, 0, len(p.Tools))
	for _, t := range p.Tools {
		b.systemTokens += ToolTokens(tok, t)
		b.defs = append(b.defs, t)
	}
	var err error
	if b.rules, err = m.rulesLayer(ctx, p.TimelineScope, b, &b.warns); err != nil {
		return err
	}
	if b.settings, err = m.settingsLayer(ctx, p.TimelineScope, b.src); err != nil {
		// Preferences are worth having, not worth failing the turn for.
		m.sourceFailed(&b.warns, p, "remembered settings", "settings skipped", err)
		b.settings = textLayer{heading: b.settings.heading}
	}
	input, err := m.gatherInput(ctx, b)
	if err != nil {
		return err
	}
	b.inputContent = input.Content
	// The summary cursor is read before the retrieved layer, which reads
	// the main scope's cursor too (read once when it is the same).
	readScope := m.ReadScope(p.ContextScope)
	b.ins.ReadScope = readScope
	var summary services.Summary
	if b.src != nil {
		summary = b.src.Summary
	} else if summary, err = m.opts.Store.GetSummary(ctx, p.TimelineScope, readScope); err != nil && !services.IsKind(err, services.ENOTFOUND) {
		return err
	}
	var mainSummary *services.Summary
	if readScope == services.MainScope {
		mainSummary = &summary
	}
	if b.retrieved, err = m.retrievedLayer(ctx, p, input.Content, mainSummary, &b.warns); err != nil {
		return err
	}
	b.todo = m.todoLayer(p.TimelineScope, p.ContextScope)

	b.cursor = summary.UntilMessageID
	b.ins.CursorID = b.cursor
	segments, err := m.segments(ctx, p.TimelineScope, readScope, b.src)
	if err != nil {
		return err
	}
	// A compaction committed between the two reads (it runs beside runs)
	// must not give this prompt a summary of turns it also sends whole:
	// only segments up to the cursor read above.
	upTo := segments[:0]
	for _, s := range segments {
		if s.UntilMessageID <= b.cursor {
			upTo = append(upTo, s)
		}
	}
	b.segments = upTo
	return nil
}

// gatherInput reads the current input (p.TriggerID; none for a preview)
// and sets its text (header, @path reminder, files), images and tokens.
func (m *Manager) gatherInput(ctx context.Context, b *build) (services.Message, error) {
	p := b.p
	var input services.Message
	var err error
	if p.Trigger != nil && p.Trigger.ID == p.TriggerID {
		input = *p.Trigger
	} else if p.TriggerID != 0 {
		if input, err = m.opts.Store.GetMessage(ctx, p.TriggerID); err != nil {
			return input, err
		}
	}
	if p.TriggerID != 0 {
		if input.TimelineScope != p.TimelineScope {
			return input, m.violation(p, "input message", input.TimelineScope)
		}
	}
	var inputFiles []services.Attachment
	if p.TriggerID != 0 && m.opts.Attachments != nil && hasFiles(input) {
		files, err := m.opts.Attachments.AttachmentsOf(ctx, p.TimelineScope, []int64{p.TriggerID})
		if err != nil {
			return input, err
		}
		inputFiles = files[p.TriggerID]
	}
	b.inputText = withFiles(markdown.WithAtPathReminder(input.Content), inputFiles)
	if p.TriggerID != 0 {
		// When and where the current message was sent: with the input, not
		// in the stable prefix, so the cached prefix stays the same.
		b.inputText = m.InputHeader(input.Source) + "\n\n" + b.inputText
	}
	var imageTokens int
	b.inputImages, imageTokens = m.images(ctx, p.TimelineScope, inputFiles)
	if p.TriggerID != 0 {
		b.inputTokens = b.tok.Count(b.inputText) + MessageOverhead + 1 + imageTokens
	}
	return input, nil
}

// allocate shares the budget among the layers (the budget profile's
// AllocateWith), cuts each to its share, and reads history into what is
// left: summary segments first (oldest dropped when they do not fit), then
// whole recent turns, cut in steps (stepCut).
func (m *Manager) allocate(ctx context.Context, b *build) error {
	p, tok := b.p, b.tok
	needs := map[Layer]int{
		LayerSystem:    b.systemTokens,
		LayerRules:     b.rules.tokens(tok),
		LayerSettings:  b.settings.tokens(tok),
		LayerRetrieved: b.retrieved.tokens(tok),
		// History takes whatever the other layers leave (read within it
		// below); for allocation it asks for its minimum, so retrieved and
		// settings are only trimmed when the window is really short.
		LayerHistory: min(b.profile.Layers[string(LayerHistory)].MinTokens, b.budget/4),
		LayerInput:   b.inputTokens,
		LayerTodo:    b.todo.tokens(tok),
	}
	alloc, aw := AllocateWith(b.profile, b.budget, needs)
	for _, w := range aw {
		if w.Code == CodeInputTooLarge && (alloc[LayerInput] < b.inputTokens || b.inputTokens > MaxInputTokens) {
			return services.CodedErrorf(services.ETOOLARGE, CodeInputTooLarge,
				"the message is too long for the model's context window (%d tokens; %d fit)", b.inputTokens, alloc[LayerInput])
		}
		if w.Code != CodeInputTooLarge {
			b.warns.add(w.Code, "%s", w.Message)
		}
	}
	b.alloc = alloc

	// Trim each layer to its allocation.
	b.rulesBudget = b.rulesLimit(alloc[LayerRules])
	b.rulesText, b.rulesTrim, b.rulesOut = b.rules.fitRules(tok, b.rulesBudget, b.inputContent)
	rulesTrimmedWarning(&b.warns, b.rules, b.rulesOut, b.rulesBudget)
	b.settingsText, b.settingsTrim = b.settings.fit(tok, alloc[LayerSettings])
	b.retrievedText, b.retrievedTrim = b.retrieved.fit(tok, alloc[LayerRetrieved])
	b.todoText, b.todoTrim = b.todo.fit(tok, alloc[LayerTodo])
	for i := len(b.retrieved.items) - b.retrievedTrim; i < len(b.retrieved.items); i++ {
		if src := b.retrieved.sources[i]; strings.HasPrefix(src, KindPin+": ") {
			b.warns.add(CodePinTrimmed, "%s (%d tokens) left out: the retrieved layer's budget is %d tokens",
				src, tok.Count(b.retrieved.items[i]), alloc[LayerRetrieved])
		}
	}
	spent := b.systemTokens + b.used(b.rulesText) + b.used(b.settingsText) + b.used(b.retrievedText) + b.used(b.todoText) + b.inputTokens
	b.historyBudget = max(b.budget-spent, 0)
	// Summary segments first (oldest dropped when they do not fit), then turns.
	segBudget := b.historyBudget / 2
	if m.opts.HistoryTokens > 0 {
		segBudget = min(segBudget, m.opts.HistoryTokens/2)
	}
	b.segKept, b.segTrim, b.segUsed = fitSegments(b.segments, segBudget)
	q := services.ContextQuery{TimelineScope: p.TimelineScope, ByTimelineOnly: true, AfterID: b.cursor}
	if m.opts.ScopedRead {
		q = services.ContextQuery{TimelineScope: p.TimelineScope, ContextScope: p.ContextScope, AfterID: b.cursor}
	}
	hist, err := m.recentTurns(ctx, q, p.TriggerID, b.historyBudget-b.segUsed, p.TimelineScope, &b.warns)
	if err != nil {
		return err
	}
	b.turns, b.turnTrim, b.turnUsed = m.stepCut(p.TimelineScope+"/"+p.ContextScope, hist.turns, hist.trimmed, hist.used, hist.limit, p.TriggerID != 0)
	b.ins.WorkingSet, b.ins.HistoryTurnTokens, b.ins.HistoryTrimmed = hist.limit, b.turnUsed, b.turnTrim
	b.ins.HistoryTurns = max(len(b.turns)-btoi(p.TriggerID != 0), 0)
	// The taint of what the prompt carries: the retrieved items and recap
	// lines the budget kept, not every one gathered.
	b.ins.TaintedBy, b.ins.TaintSources = historyTaint(b.segKept, b.turns, p.TriggerID,
		b.retrieved.taintOf(len(b.retrieved.items)-b.retrievedTrim), b.todo.taintOf(len(b.todo.items)-b.todoTrim))
	if u := b.retrieved.untrustedOf(len(b.retrieved.items) - b.retrievedTrim); u != "" && b.ins.TaintedBy == "" {
		// An uploaded file's own text (a reference, a pin): untrusted itself.
		b.ins.TaintedBy, b.ins.TaintSources = u, u
	}
	return nil
}

// used is what a layer's text takes in the prompt: nothing when empty.
func (b *build) used(text string) int {
	if text == "" {
		return 0
	}
	return b.tok.Count(text) + MessageOverhead
}

// assemble writes the request: the stable prefix (system, tools, rules,
// settings) and its hash, the summary as system content after it, then
// history byte for byte what the previous turn sent, the retrieved layer
// and the current input (with the todo recap), and the cache points.
func (m *Manager) assemble(b *build) {
	p := b.p
	b.system = b.baseSystem
	if b.rulesText != "" {
		b.system += "\n\n" + b.rulesText
	}
	if b.settingsText != "" {
		b.system += "\n\n" + b.settingsText
	}
	b.ins.PrefixHash = PrefixHash(PrefixParts{System: b.baseSystem, Tools: b.defs, Rules: b.rulesText, Settings: b.settingsText})
	key := p.TimelineScope + "/" + p.ContextScope
	m.mu.Lock()
	b.ins.PrefixUnchanged = m.lastHash[key] == b.ins.PrefixHash
	if len(m.lastHash) >= maxScopesRemembered {
		clear(m.lastHash)
	}
	m.lastHash[key] = b.ins.PrefixHash
	m.mu.Unlock()

	// The archived summary is the service's own account of the earlier
	// conversation, not something the owner said: it goes with the system
	// content, after the stable prefix (which stays cached), not as a user
	// message (docs/CONTEXT.md).
	if len(b.segKept) > 0 {
		var sb strings.Builder
		sb.WriteString(SummaryPreamble)
		for _, s := range b.segKept {
			sb.WriteString("\n\n")
			sb.WriteString(s.SummaryText)
		}
		b.systemContext = sb.String()
	}
	// History first, byte for byte what the previous turn sent, then what
	// changes every turn: the retrieved layer and the current input. The
	// ends of the last two past turns are cache points (CacheAt): the
	// previous turn wrote the older one, this turn writes the newer one.
	var msgs []llm.Message
	var ends []int
	for i, t := range b.turns {
		current := p.TriggerID != 0 && i == len(b.turns)-1
		rendered := t.render(current, m.historyRule)
		if current {
			if b.retrievedText != "" {
				msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: b.retrievedText}, llm.Message{Role: llm.RoleAssistant, Content: "Noted."})
			}
			// The current input carries its @path reminder and the todo recap.
			last := &rendered[0]
			last.Content, last.Images = b.inputText, b.inputImages
			if b.todoText != "" {
				last.Content += "\n\n" + b.todoText
			}
			msgs = append(msgs, RepairToolCalls(rendered)...)
			continue
		}
		msgs = append(msgs, RepairToolCalls(rendered)...)
		ends = append(ends, len(msgs)-1)
	}
	if p.TriggerID == 0 && b.retrievedText != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: b.retrievedText}, llm.Message{Role: llm.RoleAssistant, Content: "Noted."})
	}
	b.msgs = msgs
	if n := len(ends); n > 0 {
		b.cacheAt = ends[max(n-2, 0):]
	}
}

// inspect fills the inspection record: each layer's tokens, budget, items
// and trims, the total and the warnings; explained (p.Explain), each
// layer's text and the sources behind it.
func (m *Manager) inspect(b *build) {
	p, alloc := b.p, b.alloc
	b.ins.Layers = []LayerReport{
		{Layer: LayerSystem, Tokens: b.systemTokens, Budget: alloc[LayerSystem], Items: 1 + len(p.Tools)},
		{Layer: LayerRules, Tokens: b.used(b.rulesText), Budget: b.rulesBudget, Items: len(b.rules.items), Trimmed: b.rulesTrim, Reason: b.rulesReason()},
		{Layer: LayerSettings, Tokens: b.used(b.settingsText), Budget: alloc[LayerSettings], Items: len(b.settings.items) - b.settingsTrim, Trimmed: b.settingsTrim, Reason: trimReason(b.settingsTrim, "lowest-confidence settings left out")},
		{Layer: LayerRetrieved, Tokens: b.used(b.retrievedText), Budget: alloc[LayerRetrieved], Items: len(b.retrieved.items) - b.retrievedTrim, Trimmed: b.retrievedTrim, Reason: trimReason(b.retrievedTrim, "lowest-score items left out")},
		{Layer: LayerHistory, Tokens: b.segUsed + b.turnUsed - inputInHistory(p, b.turns), Budget: b.historyBudget, Items: len(b.segKept) + max(len(b.turns)-btoi(p.TriggerID != 0), 0), Trimmed: b.segTrim + b.turnTrim, Reason: trimReason(b.segTrim+b.turnTrim, "oldest segments and turns left out to fit")},
		{Layer: LayerInput, Tokens: b.inputTokens, Budget: alloc[LayerInput], Items: btoi(p.TriggerID != 0)},
		{Layer: LayerTodo, Tokens: b.used(b.todoText), Budget: alloc[LayerTodo], Items: btoi(b.todoText != ""), Trimmed: b.todoTrim},
	}
	total := 0
	for _, l := range b.ins.Layers {
		total += l.Tokens
	}
	b.ins.TotalTokens = total
	b.ins.Warnings = b.warns.list
	if p.Explain {
		m.explain(b)
	}
}

// explain adds each layer's text and the sources behind it.
func (m *Manager) explain(b *build) {
	p := b.p
	texts := map[Layer]string{LayerSystem: b.baseSystem, LayerRules: b.rulesText, LayerSettings: b.settingsText,
		LayerRetrieved: b.retrievedText, LayerTodo: b.todoText}
	if p.TriggerID != 0 {
		texts[LayerInput] = b.inputText
	}
	var hb strings.Builder
	hb.WriteString(b.systemContext)
	for i, t := range b.turns {
		if p.TriggerID != 0 && i == len(b.turns)-1 {
			break
		}
		for _, msg := range t.render(false, m.historyRule) {
			if hb.Len() > 0 {
				hb.WriteString("\n\n")
			}
			hb.WriteString("[" + string(msg.Role) + "] " + msg.Content)
			for _, c := range msg.ToolCalls {
				hb.WriteString("\n(tool call " + c.Name + " " + string(c.Arguments) + ")")
			}
		}
	}
	texts[LayerHistory] = hb.String()
	for i := range b.ins.Layers {
		b.ins.Layers[i].Text = texts[b.ins.Layers[i].Layer]
	}
	b.ins.Sources = m.sources(sourceParts{p: p, base: b.baseSystem, rules: b.rules, rulesOut: b.rulesOut, settings: b.settings, retrieved: b.retrieved, todo: b.todo,
		trims:   map[Layer]int{LayerRules: b.rulesTrim, LayerSettings: b.settingsTrim, LayerRetrieved: b.retrievedTrim, LayerTodo: b.todoTrim},
		reasons: b.ins.Layers, segKept: b.segKept, segTrim: b.segTrim, turns: b.turns, turnTrim: b.turnTrim, inputTokens: b.inputTokens})
}

// rulesReason says why rules were trimmed: whole rules left out by
// priority (fitRules), or the text cut.
func (b *build) rulesReason() string {
	if b.rulesOut != nil {
		return trimReason(b.rulesTrim, "rules left out to fit (the owner's own first, then by relevance to the input)")
	}
	return trimReason(b.rulesTrim, "rule text cut to fit")
}

// rulesLimit is what the rules layer may take: its allocation, and when
// the rules need more than their share of the budget (the profile's share
// of what the system layer leaves, at least its minimum), the larger of
// that share and what the owner's own rules need. So the owner's own rules
// are cut only when the prompt cannot hold them at all, and the agent's
// approved proposals fill what is left of the share, most relevant first.
func (b *build) rulesLimit(alloc int) int {
	profile := b.profile
	if profile.Validate() != nil {
		profile = services.DefaultContextBudget()
	}
	lb := profile.Layers[string(LayerRules)]
	share := max((b.budget-b.systemTokens)*lb.SharePercent/100, lb.MinTokens)
	if b.rules.tokens(b.tok) <= share {
		return alloc
	}
	return min(alloc, max(share, b.rules.estimate(b.tok, b.rules.explicit)))
}
