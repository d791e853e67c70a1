package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
)

// EventCancel asks every instance to cancel a run it executes (/stop).
const EventCancel = "cancel"

// command answers a chat command with a system message in the timeline:
// its handler in services.Commands, run by commandHandlers.
func (s *Service) command(ctx context.Context, msg services.Message, name, args string) error {
	var reply string
	var err error
	if c, ok := services.LookupCommand(name); ok && c.Run != nil {
		reply, err = c.Run(commandHandlers{s}, ctx, services.CommandCall{Message: msg, Args: args})
	} else {
		reply = fmt.Sprintf("Unknown command /%s. /help lists the commands.", name)
	}
	if err != nil {
		reply = "That command failed: " + services.ErrorMessage(err)
	}
	if reply == "" {
		return nil // the handler posted its reply itself (an approval's decision)
	}
	_, _, perr := s.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: msg.TimelineScope, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: reply, DedupeKey: fmt.Sprintf("cmd:%d", msg.ID), ReplyTo: msg.ID,
		Metadata: services.MessageMeta{Command: name, ReplyTo: msg.ID}.Encode(),
	})
	return perr
}

// commandHandlers are the handlers of services.Commands, one method each.
type commandHandlers struct{ s *Service }

var _ services.CommandHandlers = commandHandlers{}

func (commandHandlers) Help(context.Context, services.CommandCall) (string, error) {
	return helpText(), nil
}

func (commandHandlers) Start(context.Context, services.CommandCall) (string, error) {
	return "Hello! Write anything and the agent answers.\n\n" + helpText(), nil
}

func (h commandHandlers) New(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdNew(ctx, c.Message)
}

func (h commandHandlers) Stop(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdStop(ctx, c.Message)
}

func (h commandHandlers) Retry(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdRetry(ctx, c.Message)
}

func (h commandHandlers) Status(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdStatus(ctx, c.Message)
}

func (h commandHandlers) Context(ctx context.Context, c services.CommandCall) (string, error) {
	if strings.EqualFold(strings.TrimSpace(c.Args), "full") {
		return h.s.cmdContextFull(ctx, c.Message)
	}
	return h.s.cmdContext(ctx, c.Message)
}

func (h commandHandlers) Pin(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdPin(ctx, c.Message, c.Args, true)
}

func (h commandHandlers) Unpin(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdPin(ctx, c.Message, c.Args, false)
}

func (h commandHandlers) Pins(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdPins(ctx, c.Message)
}

func (h commandHandlers) Subagents(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdSubagents(ctx, c.Message)
}

func (h commandHandlers) Rules(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdRules(ctx, c.Message, c.Args)
}

func (h commandHandlers) Tools(_ context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdTools(c.Message.TimelineScope), nil
}

func (h commandHandlers) Schedules(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdSchedules(ctx, c.Message, c.Args)
}

func (h commandHandlers) Budget(ctx context.Context, _ services.CommandCall) (string, error) {
	return h.s.cmdBudget(ctx)
}

func (h commandHandlers) Approve(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdDecide(ctx, c.Message, c.Args, true)
}

func (h commandHandlers) Deny(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdDecide(ctx, c.Message, c.Args, false)
}

func (h commandHandlers) Policy(context.Context, services.CommandCall) (string, error) {
	return h.s.cmdPolicy(), nil
}

func (h commandHandlers) Memory(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdMemory(ctx, c.Message, c.Args)
}

func (h commandHandlers) Pair(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdPair(ctx, c.Message, c.Args)
}

// cmdPair lists the Telegram users waiting for the owner's approval, or
// approves or denies one by its code, through the desk that tells the
// stranger and edits the request wherever it was shown. Only the owner's
// timeline may decide.
func (s *Service) cmdPair(ctx context.Context, msg services.Message, args string) (string, error) {
	if msg.TimelineScope != services.DefaultTimeline {
		return "Only the owner decides pairings.", nil
	}
	if s.opts.Pairings == nil {
		return "Telegram is not set up (TELEGRAM_BOT_TOKEN), so nobody can ask to pair.", nil
	}
	verb, code, _ := strings.Cut(strings.TrimSpace(args), " ")
	code = strings.TrimSpace(code)
	switch {
	case verb == "":
		return s.pairingList(ctx)
	case (verb != "approve" && verb != "deny") || code == "" || strings.ContainsAny(code, " \t\n"):
		return "Usage: /pair (who waits), /pair approve CODE or /pair deny CODE.", nil
	}
	decide, word := s.opts.Pairings.ApprovePairing, "approved"
	if verb == "deny" {
		decide, word = s.opts.Pairings.DenyPairing, "denied"
	}
	p, err := decide(ctx, code)
	if services.IsKind(err, services.ENOTFOUND) || services.IsKind(err, services.EINVALID) {
		return services.ErrorMessage(err), nil
	}
	if err != nil {
		return "", err
	}
	if s.opts.Audit != nil {
		if _, err := s.opts.Audit.AppendAudit(ctx, services.PairingAudit(string(msg.Source), word, p)); err != nil {
			s.log.Error("audit: pairing decision not recorded", "user_id", p.UserID, "err", err)
		}
	}
	if verb == "deny" {
		return fmt.Sprintf("Denied %s (Telegram id %d); they were told.", p.DisplayName, p.UserID), nil
	}
	return fmt.Sprintf("Approved %s (Telegram id %d): they talk to the agent in %s, which your timeline never shows; they were told.",
		p.DisplayName, p.UserID, p.TimelineScope), nil
}

// pairingList is /pair without arguments: who waits, with their codes.
func (s *Service) pairingList(ctx context.Context) (string, error) {
	list, err := s.opts.Pairings.ListPairings(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	approved := 0
	for _, p := range list {
		if p.Approved() {
			approved++
			continue
		}
		if b.Len() == 0 {
			b.WriteString("Waiting for your decision (/pair approve CODE or /pair deny CODE):")
		}
		fmt.Fprintf(&b, "\n%s (Telegram id %d): code %s, valid until %s UTC", p.DisplayName, p.UserID, p.Code, p.ExpiresAt.UTC().Format("15:04"))
	}
	if b.Len() == 0 {
		b.WriteString("Nobody waits to pair.")
	}
	fmt.Fprintf(&b, "\n%d approved (the pairings page lists them).", approved)
	return b.String(), nil
}

func (h commandHandlers) Voice(ctx context.Context, c services.CommandCall) (string, error) {
	return h.s.cmdVoice(ctx, c.Message, c.Args)
}

// cmdVoice shows or sets whether a voice question in this chat is answered
// with a voice note as well as the text.
func (s *Service) cmdVoice(ctx context.Context, msg services.Message, args string) (string, error) {
	if s.opts.Speaker == nil {
		return "Spoken replies are off: no speech service is configured (set TTS_URL).", nil
	}
	if msg.Source != services.SourceTelegram || msg.Meta.ChatID == 0 {
		return "Spoken replies are sent on Telegram: there, /voice on or /voice off sets them for the chat.", nil
	}
	switch strings.ToLower(strings.TrimSpace(args)) {
	case "":
		on, err := s.opts.Store.VoiceRepliesOn(ctx, msg.Source, msg.Meta.ChatID)
		if err != nil {
			return "", err
		}
		if on {
			return "Spoken replies are on: a voice note is answered with a voice note as well as the text. /voice off turns them off.", nil
		}
		return "Spoken replies are off in this chat. /voice on turns them on.", nil
	case "on":
		if err := s.opts.Store.SetVoiceReplies(ctx, msg.Source, msg.Meta.ChatID, true); err != nil {
			return "", err
		}
		return "Spoken replies on: a voice note is answered with a voice note as well as the text.", nil
	case "off":
		if err := s.opts.Store.SetVoiceReplies(ctx, msg.Source, msg.Meta.ChatID, false); err != nil {
			return "", err
		}
		return "Spoken replies off: answers come as text only.", nil
	}
	return "Usage: /voice on or /voice off (no argument: the current setting).", nil
}

// cmdNew starts a fresh context: the summary cursors of the timeline move to
// this message with an empty summary, so prompts start here. Nothing stored
// is deleted.
func (s *Service) cmdNew(ctx context.Context, msg services.Message) (string, error) {
	for _, scope := range []string{services.MainScope, services.GlobalSummaryScope} {
		var err error
		if s.opts.ContextStore != nil {
			_, err = s.opts.ContextStore.AppendSegment(ctx, services.Segment{TimelineScope: msg.TimelineScope, Scope: scope,
				Kind: services.SegmentReset, FromMessageID: msg.ID, UntilMessageID: msg.ID})
		} else {
			_, err = s.opts.Store.UpsertSummary(ctx, services.Summary{TimelineScope: msg.TimelineScope, Scope: scope, UntilMessageID: msg.ID})
		}
		if err != nil && !services.IsKind(err, services.ECONFLICT) {
			return "", err
		}
	}
	return "Started a fresh context. Earlier messages stay in the history but are no longer sent to the model.", nil
}

// cmdStop cancels the timeline's queued runs and asks every instance to
// cancel its running one.
func (s *Service) cmdStop(ctx context.Context, msg services.Message) (string, error) {
	stopped := 0
	for _, status := range []services.RunStatus{services.RunQueued, services.RunRunning} {
		runs, err := s.opts.Store.ListRuns(ctx, services.RunQuery{TimelineScope: msg.TimelineScope, Status: status, Limit: 100})
		if err != nil {
			return "", err
		}
		for _, r := range runs {
			if s.stopRun(ctx, r, "stopped by the owner before it started") {
				stopped++
			}
		}
	}
	// A run waiting for approvals stops waiting: its held calls are not run.
	cancelled, err := s.cancelApprovals(ctx, msg.TimelineScope)
	if err != nil {
		return "", err
	}
	if stopped == 0 && cancelled == 0 {
		return "Nothing is running.", nil
	}
	if cancelled > 0 {
		return fmt.Sprintf("Stopping %s; %s waiting for approval cancelled.", services.Count(stopped, "run", "runs"), services.Count(cancelled, "call", "calls")), nil
	}
	return fmt.Sprintf("Stopping %s.", services.Count(stopped, "run", "runs")), nil
}

// cmdRetry asks the timeline's last question again when its answer failed,
// timed out, was interrupted or stopped: the question is posted anew (from
// the channel /retry came from, once per /retry) and answered like any
// message; nothing stored is changed.
func (s *Service) cmdRetry(ctx context.Context, msg services.Message) (string, error) {
	runs, err := s.opts.Store.ListRuns(ctx, services.RunQuery{TimelineScope: msg.TimelineScope, Limit: 20})
	if err != nil {
		return "", err
	}
	var last *services.Run
	for i := range runs {
		if runs[i].IsMain() {
			last = &runs[i]
			break
		}
	}
	switch {
	case last == nil:
		return "There is no question to ask again yet.", nil
	case last.Status == services.RunQueued || last.Status == services.RunRunning:
		return "The last question is still being answered; /stop stops it.", nil
	case last.Status == services.RunOK:
		return "The last question was answered; nothing to retry. Write it again to ask for another answer.", nil
	}
	q, err := s.opts.Store.GetMessage(ctx, last.TriggerMessageID)
	if err != nil {
		return "", err
	}
	if _, ok := compactCommand(q); ok {
		return "The last run was a /compact; send /compact again.", nil
	}
	files, err := s.opts.Store.AttachmentsOf(ctx, msg.TimelineScope, []int64{q.ID})
	if err != nil {
		return "", err
	}
	p := services.PostParams{TimelineScope: msg.TimelineScope, Source: msg.Source, Role: services.RoleUser, Content: q.Content,
		Attachments: files[q.ID], DedupeKey: fmt.Sprintf("retry:%d", msg.ID)}
	// The question goes the way every user message goes (chat's Post:
	// stored, its run queued in the same transaction by the ChatService's
	// turn handler, this runtime, announced, the run started).
	if _, _, err := s.opts.Chat.Post(ctx, p); err != nil {
		return "", err
	}
	return fmt.Sprintf("Asking again (the answer %s): %s", last.Status, firstLine(truncateText(q.Content, 80))), nil
}

// compactCommand reports whether m, a stored user message, is /compact and
// with what focus. Its metadata names its command (set when it was
// posted), so only a /compact's text is read again, for its arguments.
func compactCommand(m services.Message) (services.ParsedCommand, bool) {
	if m.Meta.Command != "compact" {
		return services.ParsedCommand{}, false
	}
	name, args, ok := services.ParseCommand(m.Content)
	return services.ParsedCommand{Name: name, Args: args}, ok && name == "compact"
}

// StopTurn stops the run triggered by message triggerID on timeline (a
// /v1 client that went away): queued, it ends cancelled with why; running,
// it is cancelled on whichever instance runs it and keeps its partial
// answer, as on /stop. A run already ended is left alone.
func (s *Service) StopTurn(ctx context.Context, timeline string, triggerID int64, why string) error {
	for _, status := range []services.RunStatus{services.RunQueued, services.RunRunning} {
		runs, err := s.opts.Store.ListRuns(ctx, services.RunQuery{TimelineScope: timeline, Status: status, Limit: 100})
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.TriggerMessageID == triggerID && r.IsMain() {
				s.stopRun(ctx, r, why)
			}
		}
	}
	return nil
}

// stopRun stops one run listed as queued or running: a queued run ends
// cancelled with why (false when it started meanwhile); a running one is
// cancelled here or, through the cancel event, on the instance running it.
func (s *Service) stopRun(ctx context.Context, r services.Run, why string) bool {
	if r.Status == services.RunQueued {
		if _, err := s.opts.Store.FinishRun(ctx, r.ID, services.RunFinish{Status: services.RunCancelled, Error: why}); err != nil {
			return false
		}
		s.publishRun(ctx, r, services.RunCancelled)
		return true
	}
	if !s.CancelRun(r.ID) && s.opts.Publisher != nil {
		_ = s.opts.Publisher.Publish(ctx, services.Event{Type: EventCancel, TimelineScope: r.TimelineScope, RunID: r.ID})
	}
	return true
}

func (s *Service) lastRun(ctx context.Context, timeline string) (services.Run, bool, error) {
	runs, err := s.opts.Store.ListRuns(ctx, services.RunQuery{TimelineScope: timeline, Limit: 20})
	if err != nil {
		return services.Run{}, false, err
	}
	for _, r := range runs {
		// A model run: commands answered without the model have no budget.
		if r.IsMain() && r.FinishedAt != nil && (r.PromptTokenBudget > 0 || r.PromptTokens > 0) {
			return r, true, nil
		}
	}
	return services.Run{}, false, nil
}

func (s *Service) cmdStatus(ctx context.Context, msg services.Message) (string, error) {
	var b strings.Builder
	f := s.opts.Flags
	fmt.Fprintf(&b, "Model: %s (%s), context window %d tokens.\n", s.opts.LLM.Model(), s.opts.LLM.Name(), s.opts.LLM.ContextWindow())
	fmt.Fprintf(&b, "Context: %s.\n", f.Describe())
	if s.opts.Catalog != nil && msg.TimelineScope == services.DefaultTimeline { // the owner's servers are the owner's business
		_, servers := s.opts.Catalog.ToolCatalog()
		for _, sv := range servers {
			if sv.State != "ready" {
				fmt.Fprintf(&b, "MCP server %s is %s", sv.Name, sv.State)
				if sv.Error != "" {
					fmt.Fprintf(&b, " (%s)", sv.Error)
				}
				b.WriteString(".\n")
			}
		}
	}
	switch e := s.opts.Exec; {
	case e.Offered():
		fmt.Fprintf(&b, "Exec: sandboxed (bwrap); %s.\n", e.Limits)
	case e.Enabled:
		fmt.Fprintf(&b, "Exec: not offered, the sandbox does not work: %s.\n", e.Reason)
	}
	if s.opts.Schedules != nil {
		list, err := s.opts.Schedules.List(ctx, msg.TimelineScope, 0)
		if err != nil {
			return "", err
		}
		active := 0
		for _, w := range list {
			if w.State == services.ScheduleActive {
				active++
			}
		}
		fmt.Fprintf(&b, "Schedules: %d active of %d (/schedules).\n", active, len(list))
	}
	if s.opts.Budgets != nil {
		if r, err := s.opts.Budgets.Report(ctx); err == nil {
			b.WriteString(r.StatusLine())
		}
	}
	run, ok, err := s.lastRun(ctx, msg.TimelineScope)
	if err != nil {
		return "", err
	}
	if !ok {
		b.WriteString("No answer from the model yet in this conversation.")
		return b.String(), nil
	}
	use := 0.0
	if run.ModelContextWindow > 0 {
		use = 100 * float64(run.EstimatedPromptTokens) / float64(run.ModelContextWindow)
	}
	fmt.Fprintf(&b, "Last answer (run #%d): %s. Prompt %d of %d budget tokens (%.1f%% of the window). Provider usage: %d prompt (%d cached), %d completion.",
		run.ID, run.Status, run.EstimatedPromptTokens, run.PromptTokenBudget, use, run.PromptTokens, run.CachedTokens, run.CompletionTokens)
	if run.Model == llm.ProviderOffline {
		b.WriteString(" (The offline model calls no provider: its usage is estimated, four characters a token, so budgets can be tried before a model is configured.)")
	}
	return b.String(), nil
}

// cmdContext shows the layer breakdown of the last prompt and of the next.
func (s *Service) cmdContext(ctx context.Context, msg services.Message) (string, error) {
	var b strings.Builder
	if next, err := s.previewPrompt(ctx, msg.TimelineScope); err == nil {
		fmt.Fprintf(&b, "Next prompt (before your next message): %d of %d tokens; %s.\n", next.TotalTokens, next.Budget, layerLine(next))
		for _, w := range next.Warnings {
			fmt.Fprintf(&b, "Warning %s: %s\n", w.Code, w.Message)
		}
	}
	if runs, err := s.opts.Store.ListRuns(ctx, services.RunQuery{TimelineScope: msg.TimelineScope, Limit: 1}); err == nil && len(runs) > 0 {
		if by := runs[0].TaintedBy; by != "" {
			fmt.Fprintf(&b, "Last run (%d) is tainted: it read untrusted text %s; lasting or outbound calls wait for your approval.\n", runs[0].ID, by)
		} else {
			fmt.Fprintf(&b, "Last run (%d) is untainted: only your words and the service's entered it.\n", runs[0].ID)
		}
	}
	last, err := s.lastPromptText(ctx, msg.TimelineScope)
	if err != nil {
		return "", err
	}
	b.WriteString(last)
	return b.String(), nil
}

func layerLine(ins prompt.Inspection) string {
	var parts []string
	for _, l := range ins.Layers {
		if l.Tokens > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", l.Layer, l.Tokens))
		}
	}
	return strings.Join(parts, ", ")
}

// previewPrompt builds the next main prompt without an input.
func (s *Service) previewPrompt(ctx context.Context, timeline string) (prompt.Inspection, error) {
	defs, box := s.mainTools(timeline, defaultKey(timeline))
	p, err := s.opts.Context.Build(ctx, prompt.BuildParams{TimelineScope: timeline, ContextScope: services.MainScope, Tools: defs, Deferred: box.Groups()})
	return p.Inspection, err
}

// explainPrompt previews the next main prompt with its texts and sources.
func (s *Service) explainPrompt(ctx context.Context, timeline string) (prompt.Preview, error) {
	defs, box := s.mainTools(timeline, defaultKey(timeline))
	return s.opts.Context.Preview(ctx, prompt.BuildParams{TimelineScope: timeline, ContextScope: services.MainScope, Tools: defs, Deferred: box.Groups()})
}

// ExplainPrompt is the preview of the next main prompt: every layer's
// text, tokens per layer and source, trims and warnings, and the request
// (GET /api/context/preview). It calls no model.
func (s *Service) ExplainPrompt(ctx context.Context, timeline string) (json.RawMessage, error) {
	pv, err := s.explainPrompt(ctx, timeline)
	if err != nil {
		return nil, err
	}
	return json.Marshal(pv)
}

// PreviewPrompt is the inspection of the next main prompt, built without an
// input (the /api/context endpoint).
func (s *Service) PreviewPrompt(ctx context.Context, timeline string) (json.RawMessage, error) {
	ins, err := s.previewPrompt(ctx, timeline)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ins)
}

// LastPrompt returns the inspection of a timeline's last main prompt, as
// its run's prompt step recorded it (nil and 0 before the first run).
func (s *Service) LastPrompt(ctx context.Context, timeline string) (json.RawMessage, int64, error) {
	run, ok, err := s.lastRun(ctx, timeline)
	if err != nil || !ok {
		return nil, 0, err
	}
	steps, err := s.opts.Store.ListSteps(ctx, run.ID)
	if err != nil {
		return nil, 0, err
	}
	for _, st := range steps {
		if st.Kind == services.StepPrompt {
			return st.Payload, run.ID, nil
		}
	}
	return nil, run.ID, nil
}

func (s *Service) lastPromptText(ctx context.Context, timeline string) (string, error) {
	run, ok, err := s.lastRun(ctx, timeline)
	if err != nil {
		return "", err
	}
	if !ok {
		return "No prompt has been built yet in this conversation.", nil
	}
	steps, err := s.opts.Store.ListSteps(ctx, run.ID)
	if err != nil {
		return "", err
	}
	for _, st := range steps {
		if st.Kind != "prompt" {
			continue
		}
		var ins struct {
			Layers []struct {
				Layer   string `json:"layer"`
				Tokens  int    `json:"tokens"`
				Items   int    `json:"items"`
				Trimmed int    `json:"trimmed"`
				Reason  string `json:"reason"`
			} `json:"layers"`
			Total      int              `json:"total_tokens"`
			Budget     int              `json:"budget"`
			PrefixHash string           `json:"prefix_hash"`
			Warnings   []prompt.Warning `json:"warnings"`
		}
		if err := json.Unmarshal(st.Payload, &ins); err != nil {
			return "", err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Last prompt (run #%d): %d of %d tokens.\n", run.ID, ins.Total, ins.Budget)
		for _, l := range ins.Layers {
			fmt.Fprintf(&b, "- %s: %d tokens, %s", l.Layer, l.Tokens, services.Count(l.Items, "item", "items"))
			if l.Reason != "" {
				fmt.Fprintf(&b, " (%s)", l.Reason)
			}
			b.WriteString("\n")
		}
		// Blank lines keep what follows out of the list's last item.
		for _, w := range ins.Warnings {
			fmt.Fprintf(&b, "\nWarning %s: %s\n", w.Code, w.Message)
		}
		fmt.Fprintf(&b, "\nStable prefix hash: %.12s", ins.PrefixHash)
		return b.String(), nil
	}
	return "The last run recorded no prompt.", nil
}

// cmdRules lists, adds or removes the owner's rules of this timeline and
// decides the agent's proposals: "/rules", "/rules add TEXT", "/rules add
// --check TEXT PATTERN" (services.ParseRuleAdd), "/rules soft TEXT", "/rules remove ID", "/rules approve N", "/rules reject N".
func (s *Service) cmdRules(ctx context.Context, msg services.Message, args string) (string, error) {
	if s.opts.ContextStore == nil {
		return "Rules are not available.", nil
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	rest = strings.TrimSpace(rest)
	switch verb {
	case "":
		cs, err := s.opts.ContextStore.ListConstraints(ctx, msg.TimelineScope)
		if err != nil {
			return "", err
		}
		var pending []services.RuleProposal
		if p := s.proposals(); p != nil {
			if pending, err = p.ListRuleProposals(ctx, msg.TimelineScope); err != nil {
				return "", err
			}
		}
		var b strings.Builder
		if len(cs) == 0 {
			b.WriteString("No rules yet. Add one with /rules add TEXT (hard) or /rules soft TEXT.")
		} else {
			b.WriteString("Rules (sent with every prompt; when they do not all fit, yours are kept first, then the most relevant to the message):")
		}
		for _, c := range cs {
			fmt.Fprintf(&b, "\n#%d [%s] %s", c.ID, hardSoft(c.Hard), c.Text)
			if c.Check != "" {
				fmt.Fprintf(&b, " (check %s)", quoteCheck(c.Check))
			}
		}
		if len(pending) > 0 {
			b.WriteString("\nProposed by the agent, not in use until you approve (/rules approve N or /rules reject N):")
			for _, p := range pending {
				fmt.Fprintf(&b, "\nproposal %d [%s] %s", p.ID, hardSoft(p.Hard), p.Text)
			}
		}
		return b.String(), nil
	case "approve", "reject":
		return s.cmdRuleDecision(ctx, msg, verb, rest)
	case "add", "soft":
		text, check := rest, ""
		if verb == "add" {
			var err error
			if text, check, err = services.ParseRuleAdd(rest); err != nil {
				return "", err
			}
		}
		c, err := s.opts.ContextStore.CreateConstraint(ctx, services.Constraint{TimelineScope: msg.TimelineScope, Text: text, Hard: verb == "add", Check: check})
		if err != nil {
			return "", err
		}
		if c.Check != "" {
			s.auditCommand(ctx, msg, services.RuleAudit("", "added", c))
			return fmt.Sprintf("Added rule #%d; answers matching %s will be flagged.", c.ID, quoteCheck(c.Check)), nil
		}
		s.auditCommand(ctx, msg, services.RuleAudit("", "added", c))
		return fmt.Sprintf("Added rule #%d.", c.ID), nil
	case "remove":
		var id int64
		if _, err := fmt.Sscan(strings.TrimPrefix(rest, "#"), &id); err != nil {
			return "", services.Errorf(services.EINVALID, "say which rule: /rules remove ID")
		}
		cs, err := s.opts.ContextStore.ListConstraints(ctx, msg.TimelineScope)
		if err != nil {
			return "", err
		}
		for _, c := range cs {
			if c.ID == id {
				if err := s.opts.ContextStore.DeleteConstraint(ctx, msg.TimelineScope, id, c.Version); err != nil {
					return "", err
				}
				s.auditCommand(ctx, msg, services.RuleAudit("", "removed", c))
				return fmt.Sprintf("Removed rule #%d.", id), nil
			}
		}
		return "", services.Errorf(services.ENOTFOUND, "no rule #%d in this conversation", id)
	}
	return "", services.Errorf(services.EINVALID, "unknown /rules verb %q (want add, soft, remove, approve or reject)", verb)
}

// auditCommand records a change a chat command made, when the runtime
// keeps the audit trail (Deps.Audit): the owner's, or a paired stranger's
// in their timeline.
func (s *Service) auditCommand(ctx context.Context, msg services.Message, e services.AuditEntry) {
	audit := s.opts.Audit
	if audit == nil {
		return
	}
	e.Actor, e.Channel, e.TimelineScope = "owner", string(msg.Source), msg.TimelineScope
	if id, ok := strings.CutPrefix(msg.TimelineScope, "tg:"); ok {
		e.Actor = "stranger:" + id
	}
	if _, err := audit.AppendAudit(ctx, e); err != nil {
		s.log.Error("audit: command's change not recorded", "message_id", msg.ID, "action", e.Action, "err", err)
	}
}

// quoteCheck writes a check pattern as the owner typed it: in single
// quotes (double quotes when it holds a single quote).
func quoteCheck(p string) string {
	if strings.Contains(p, "'") {
		return fmt.Sprintf("%q", p)
	}
	return "'" + p + "'"
}

func hardSoft(hard bool) string {
	if hard {
		return "hard"
	}
	return "soft"
}

// cmdSubagents lists the timeline's recent child runs and their states.
func (s *Service) cmdSubagents(ctx context.Context, msg services.Message) (string, error) {
	runs, err := s.opts.Store.ListRuns(ctx, services.RunQuery{TimelineScope: msg.TimelineScope, Limit: 200})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	n := 0
	for _, r := range runs {
		if r.ParentRunID == 0 || n >= 20 {
			continue
		}
		n++
		agentID := r.AgentID
		if agentID == "" {
			agentID = "sub-agent"
		}
		dur := ""
		if r.FinishedAt != nil {
			dur = fmt.Sprintf(", %.1fs", r.FinishedAt.Sub(r.StartedAt).Seconds())
		}
		fmt.Fprintf(&b, "\n#%d %s in %s (parent #%d): %s%s", r.ID, agentID, r.ContextScope, r.ParentRunID, r.Status, dur)
	}
	why := s.opts.Flags.DelegationReason()
	if f := s.opts.Flags; !f.SubAgentsOn() && f.Origin != "" {
		why += " (mode " + f.Mode() + ": " + f.Origin + ")"
	}
	if n == 0 {
		return "No delegated tasks yet: " + why + ".", nil
	}
	return fmt.Sprintf("Recent delegated tasks (%s):%s", why, b.String()), nil
}

// cmdTools lists the tools the agent has in this conversation, built-in
// first, then each MCP server with its state.
func (s *Service) cmdTools(timeline string) string {
	var builtin []string
	bySource := map[string][]string{}
	for _, t := range s.offeredTools(timeline) {
		if t.Source == "" {
			builtin = append(builtin, t.Name)
		} else {
			bySource[t.Source] = append(bySource[t.Source], strings.TrimPrefix(t.Name, t.Source+"__"))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Built-in tools (%d): %s.", len(builtin), strings.Join(builtin, ", "))
	if slices.Contains(builtin, "exec") && s.opts.Exec.Limits != "" {
		fmt.Fprintf(&b, "\nexec runs in a sandbox: %s.", s.opts.Exec.Limits)
	}
	if s.opts.Catalog == nil {
		return b.String()
	}
	_, servers := s.opts.Catalog.ToolCatalog()
	if timeline != services.DefaultTimeline {
		// A paired stranger learns nothing of the owner's servers: only
		// those shared with every conversation, by their tools.
		for _, sv := range servers {
			if names := bySource[sv.Name]; len(names) > 0 {
				fmt.Fprintf(&b, "\nMCP server %s: %d tools: %s.", sv.Name, len(names), strings.Join(names, ", "))
			}
		}
		return b.String()
	}
	if len(servers) == 0 {
		b.WriteString("\nNo MCP servers are configured (MCP_SERVERS).")
	}
	for _, sv := range servers {
		names := bySource[sv.Name]
		fmt.Fprintf(&b, "\nMCP server %s (%s, %s): ", sv.Name, sv.Transport, sv.State)
		switch {
		case len(names) > 0:
			fmt.Fprintf(&b, "%d tools: %s.", len(names), strings.Join(names, ", "))
		case sv.Tools > 0:
			b.WriteString("its tools are not offered in this conversation (only in the owner's).")
		case sv.Error != "":
			fmt.Fprintf(&b, "no tools yet (%s).", sv.Error)
		default:
			b.WriteString("no tools yet.")
		}
	}
	return b.String()
}

// helpText lists the chat commands.
func helpText() string {
	var b strings.Builder
	b.WriteString("Commands (answered at once, without the model):")
	for _, c := range services.ListedCommands() {
		usage := "/" + c.Name
		if c.Args != "" {
			usage += " " + c.Args
		}
		fmt.Fprintf(&b, "\n%s — %s", usage, c.Help)
	}
	return b.String()
}
