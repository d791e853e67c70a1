package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/tools"
)

// errStopped is the cancel cause of /stop.
var errStopped = errors.New("stopped by the owner")

// usage sums a run's provider-reported usage; truncated says the last
// reply stopped at its token bound.
type usage struct {
	prompt, completion, cached, last int
	// calls counts the model calls.
	calls     int
	truncated bool
}

// include adds x's token counts and calls (not its last prompt) to u.
func (u *usage) include(x usage) {
	u.calls += x.calls
	u.prompt += x.prompt
	u.completion += x.completion
	u.cached += x.cached
}

func (u *usage) add(x services.TokenUsage) {
	u.calls++
	u.last = x.PromptTokens
	u.prompt += x.PromptTokens
	u.completion += x.CompletionTokens
	u.cached += x.CachedTokens
}

// ExecuteRun takes a queued run to its end. A run that is not queued any
// more (answered, cancelled, interrupted) is left alone, so a retried job
// never answers twice.
func (s *Service) ExecuteRun(ctx context.Context, run services.Run) error {
	run, ok, err := s.opts.Store.StartRun(ctx, run.ID)
	if err != nil || !ok {
		return err
	}
	return s.ExecuteClaimed(ctx, run, nil)
}

// ExecuteClaimed takes a run the queue claimed (running) to its end;
// trigger, when not nil, is its message, held by the caller.
func (s *Service) ExecuteClaimed(ctx context.Context, run services.Run, trigger *services.Message) error {
	if trigger == nil || trigger.ID != run.TriggerMessageID {
		msg, err := s.opts.Store.GetMessage(ctx, run.TriggerMessageID)
		if err != nil {
			return err
		}
		trigger = &msg
	}
	if s.opts.TxEvents != nil && run.Announced {
		s.opts.TxEvents.PublishCommitted(ctx, runEvent(run, services.RunRunning)) // the others heard it with the claim
	} else {
		s.publishRun(ctx, run, services.RunRunning)
	}
	return s.execute(ctx, run, *trigger)
}

// execute runs a started run with its trigger message.
func (s *Service) execute(ctx context.Context, run services.Run, trigger services.Message) error {
	if c, ok := compactCommand(trigger); ok {
		return s.newExecution(kindCompaction, run, trigger).compact(ctx, c.Args)
	}
	e := s.newExecution(kindMain, run, trigger)
	runCtx, release := e.begin(ctx)
	defer release()
	out := e.loop(runCtx)
	// Tasks delegated inline are paid for by this run (last, which decides
	// compaction, stays the main prompt's).
	out.u.include(e.inline.total())
	return e.endMain(ctx, runCtx, out)
}

// mainOutcome is what a main run's loop came to.
type mainOutcome struct {
	answer string
	obs    prompt.Inspection
	u      usage
	err    error
}

// endMain ends a main run: its answer (or a notice saying why there is
// none) and the run's end commit together, then the compaction it
// triggers. runCtx is the run's own context (its cause says a /stop or
// the run's deadline); ctx the worker's.
func (e *execution) endMain(ctx, runCtx context.Context, out mainOutcome) error {
	s, run := e.s, e.run
	// Recording the end must not be cut short by the run's own deadline.
	endCtx := context.WithoutCancel(ctx)
	fin := services.RunFinish{
		Status:                services.RunOK,
		PromptTokenBudget:     out.obs.Budget,
		EstimatedPromptTokens: out.obs.TotalTokens,
		ModelContextWindow:    out.obs.Window,
		PromptTokens:          out.u.prompt,
		CompletionTokens:      out.u.completion,
		CachedTokens:          out.u.cached,
	}
	var waiting *waitError
	if errors.As(out.err, &waiting) {
		return e.finishWaiting(endCtx, fin, waiting)
	}
	notice, shutdown := e.mainNotice(ctx, runCtx, &fin, out.err)
	if shutdown {
		// This process is shutting down: leave the run for the reaper, which
		// tells the user it was interrupted.
		return ctx.Err()
	}
	// The answer (or notice) and the end of the run commit together: a crash
	// leaves either a queued/running run (retried or interrupted) or an
	// answered, finished one, never an answer without a closed run.
	post := e.answerParams(out)
	if out.err != nil {
		post = noticeParams(run, e.trigger, notice, fin.Status)
		post.Metadata = failureMeta(post.Metadata, out.err)
		post.ReplyToMessage = &e.trigger
	}
	// Compaction, when the last prompt and the next input near the window,
	// is a job of its own enqueued with the run's end: it runs after the
	// timeline's lock is released, so the next message is not held.
	compactStep, compactAfter := e.compaction(endCtx, services.MainScope, fmt.Sprintf("run:%d", run.ID))
	compact := out.err == nil && s.shouldCompact(endCtx, run, out.u.last, out.obs)
	if !compact {
		compactStep, compactAfter = nil, func() {}
	}
	// The answering call's settlement commits with the answer (lastStep);
	// when no end commits it, it is settled on its own.
	committed := false
	defer func() { s.finishSettle(endCtx, e.answerSettle, committed) }()
	// The run's status goes with the end's commit, after the answer.
	status := &endStatus{s: s}
	// The status is published before the answering call's step, whose
	// settlement, the transaction's last statement, sends the events (the
	// answer's, then the status) with itself; they reach the others at
	// COMMIT, in that order.
	done, ok, err := e.close(endCtx, closing{fin: fin, steps: []closeStep{e.post(post), status.step(&fin.Status), txStep(e.lastStep), compactStep}})
	if out.err == nil && (services.IsKind(err, services.EINVALID) || services.IsKind(err, services.ETOOLARGE)) {
		// An answer that cannot be stored must not leave the run open (it
		// would end 'interrupted' as if the server had restarted): the run
		// ends in error and the owner is told why.
		s.log.Error("store answer", "run_id", run.ID, "err", err)
		fin.Status, fin.Error = services.RunError, "the answer could not be stored: "+err.Error()
		done, ok, err = e.close(endCtx, closing{fin: fin, steps: []closeStep{e.post(noticeParams(run, e.trigger,
			"I wrote an answer but could not store it ("+services.ErrorMessage(err)+"). Ask again, perhaps for a shorter answer.", fin.Status)), status.step(&fin.Status), txStep(e.lastStep)}})
	}
	committed = err == nil && ok
	if err != nil {
		return err
	}
	status.announce(endCtx, committed, done, fin.Status)
	if out.err == nil && fin.Status == services.RunOK && s.opts.LLM.Name() != llm.ProviderOffline {
		// Checked after the answer's commit: a check never holds it back.
		e.checkAnswer(endCtx, out.answer)
	}
	compactAfter()
	s.pruneRequests(endCtx)
	s.log.Info("run finished", "run_id", run.ID, "timeline", run.TimelineScope, "status", fin.Status,
		"prompt_tokens", out.u.prompt, "cached_tokens", out.u.cached, "duration_ms", time.Since(e.started).Milliseconds())
	return nil
}

// txStep is a step of an end's transaction that posts nothing.
func txStep(f func(tx services.Tx) error) closeStep {
	if f == nil {
		return nil
	}
	return func(_ context.Context, tx services.Tx, _ *closed) error { return f(tx) }
}

// answerParams is a main run's answer as posted.
func (e *execution) answerParams(out mainOutcome) services.PostParams {
	run, trigger := e.run, e.trigger
	meta := services.MessageMeta{RunID: run.ID, ReplyTo: trigger.ID, Truncated: out.u.truncated, TaintedBy: e.gate.rootsText()}
	if e.s.opts.LLM.Name() == llm.ProviderOffline {
		// How to configure a model is for the owner, not for the model
		// configured later: such answers stay out of prompts.
		meta.Notice = services.NoticeOfflineModel
	}
	return services.PostParams{
		TimelineScope: run.TimelineScope, Source: services.SourceAgent, Role: services.RoleAssistant,
		Content: out.answer, DedupeKey: fmt.Sprintf("run:%d:answer", run.ID), ReplyTo: trigger.ID,
		ReplyToMessage: &e.trigger, Metadata: meta.Encode(),
	}
}

// mainNotice sets fin to how a main run ended with runErr and returns the
// owner's notice of it; shutdown says this process is stopping (the run is
// left to the reaper).
func (e *execution) mainNotice(ctx, runCtx context.Context, fin *services.RunFinish, runErr error) (notice string, shutdown bool) {
	timeout := e.lim.timeout
	switch {
	case runErr == nil:
	case errors.Is(context.Cause(runCtx), errStopped):
		fin.Status, fin.Error = services.RunCancelled, "stopped by the owner"
		notice = "Stopped."
		if p := partialText(runErr); p != "" {
			// What was written (and streamed) so far is kept, marked.
			notice = p + "\n\n_(stopped before the answer was finished)_"
		}
	// Only the run's own deadline makes a run time out; a model call that
	// timed out is a provider error (the owner is told the model is slow).
	case errors.Is(context.Cause(runCtx), context.DeadlineExceeded):
		fin.Status, fin.Error = services.RunTimeout, fmt.Sprintf("run took longer than %s", timeout)
		notice = fmt.Sprintf("I ran out of time (the limit is %s) before finishing. Ask again, perhaps in smaller steps.", timeout)
	case ctx.Err() != nil:
		return "", true
	default:
		fin.Status, fin.Error = services.RunError, runErr.Error()
		notice = "I could not answer: " + services.ErrorMessage(runErr)
		var limit *stepLimitError
		if errors.As(runErr, &limit) {
			notice = stepLimitNotice(limit)
		}
		if services.ErrorCode(runErr) == services.CodeBudgetExceeded {
			notice = budgetNotice(runErr)
		}
	}
	return notice, false
}

// recordPrompt stores the prompt's observation on the run, its prompt
// step and the reservation of its first model call (call) in one
// transaction: one commit before the model is called. The reservation is
// nil when no budget applies; a refused one commits (its count) and
// carries the refusal.
func (s *Service) recordPrompt(ctx context.Context, runID int64, obs prompt.Inspection, call services.BudgetCall) (*reservation, error) {
	var first *reservation
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		if err := tx.SetRunObservation(ctx, runID, obs.Budget, obs.TotalTokens, obs.Window); err != nil {
			return err
		}
		if _, err := tx.AppendStep(ctx, runID, services.StepPrompt, mustJSON(obs)); err != nil {
			return err
		}
		// Last in the transaction: the day's row stays locked the shortest.
		var err error
		first, err = s.reserveIn(ctx, tx, call)
		return err
	})
	return first, err
}

// stepLimitNotice tells the owner that the run used its steps, what it had
// got to, and how to go on.
func stepLimitNotice(e *stepLimitError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "I used all %d steps one answer may take before finishing.", e.Steps)
	if p := strings.TrimSpace(e.Partial); p != "" {
		b.WriteString(" Where I got to:\n\n" + p + "\n\n")
	} else {
		b.WriteString(" My tool results so far are kept. ")
	}
	b.WriteString(`Send "continue" and I will go on from there, or ask for a smaller part of the task.`)
	return b.String()
}

// noticeParams is a visible notice about a run that ended without an answer.
func noticeParams(run services.Run, trigger services.Message, text string, status services.RunStatus) services.PostParams {
	return services.PostParams{
		TimelineScope: run.TimelineScope, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: text, DedupeKey: fmt.Sprintf("run:%d:end", run.ID), ReplyTo: trigger.ID,
		Metadata: services.MessageMeta{RunID: run.ID, ReplyTo: trigger.ID, RunStatus: status}.Encode(),
	}
}

// failureMeta adds to a notice's metadata what a client needs to report
// the failure (the OpenAI-compatible channel answers with a fitting HTTP
// status): the error code and, for a model failure, the model server's
// status, whether it timed out, and the wait it asked for.
func failureMeta(raw json.RawMessage, runErr error) json.RawMessage {
	meta, err := services.DecodeMeta(raw)
	if err != nil {
		return raw
	}
	meta.ErrorCode = services.ErrorCode(runErr)
	var pe *llm.ProviderError
	if errors.As(runErr, &pe) {
		meta.ModelStatus = pe.StatusCode
		meta.ModelTimeout = pe.StatusCode == 0 && errors.Is(pe.Err, context.DeadlineExceeded)
		meta.RetryAfterMS = pe.RetryAfter.Milliseconds()
	}
	return meta.Encode()
}

// closeOpenCalls stores a result for each tool call of run left without
// one (the run was stopped, timed out or its worker died mid-call), saying
// what happened, so that no prompt ever carries an unanswered call. It runs
// in the transaction that closes the run.
func (s *Service) closeOpenCalls(ctx context.Context, tx services.Tx, run services.Run, status services.RunStatus) error {
	if run.ParentRunID != 0 {
		return nil // a child's scope is never prompted again
	}
	rows, err := tx.ListContext(ctx, services.ContextQuery{TimelineScope: run.TimelineScope, ContextScope: services.MainScope,
		AfterID: run.TriggerMessageID, Limit: 500})
	if err != nil {
		return err
	}
	var open []services.ToolCall
	answered := map[string]bool{}
	for _, m := range rows {
		meta := m.Meta
		if meta.RunID != run.ID {
			continue
		}
		open = append(open, meta.ToolCalls...)
		if meta.ToolCallID != "" {
			answered[meta.ToolCallID] = true
		}
	}
	for _, c := range open {
		if answered[c.ID] {
			continue
		}
		text := openCallResult(status)
		if _, _, err := tx.InsertMessage(ctx, services.NewMessage{
			TimelineScope: run.TimelineScope, ContextScope: s.mainScope(), Role: services.RoleTool, Source: services.SourceAgent,
			Content: text, Visible: false, DedupeKey: fmt.Sprintf("run:%d:open-call:%s", run.ID, c.ID),
			TokenCount: s.opts.Tokenizer.Count(text),
			Metadata:   services.MessageMeta{RunID: run.ID, ReplyTo: run.TriggerMessageID, ToolCallID: c.ID, ToolName: c.Name, IsError: true, ClosedBy: status}.Encode(),
		}); err != nil {
			return err
		}
	}
	return nil
}

// openCallResult is the stored result of a tool call cut off by the end of
// its run.
func openCallResult(status services.RunStatus) string {
	why := "the run ended before it finished"
	switch status {
	case services.RunInterrupted:
		why = "the server stopped (restart or crash) before it finished; its effect is unknown"
	case services.RunCancelled:
		why = "the owner stopped the run (/stop) before it finished"
	case services.RunTimeout:
		why = "the run reached its time limit before it finished"
	}
	return string(mustJSON(map[string]string{"status": string(status), "error": "This call has no result: " + why + "."}))
}

// InterruptRun closes a run whose worker died and tells the user.
func (s *Service) InterruptRun(ctx context.Context, run services.Run) error {
	trigger, err := s.opts.Store.GetMessage(ctx, run.TriggerMessageID)
	if err != nil {
		return err
	}
	e := s.newExecution(kindMain, run, trigger)
	e.gate = s.newGate(e.pol.starterOn(run.TimelineScope), run.ID, run.TaintedBy)
	// Calls it had resumed get their result; none runs (again).
	if err := s.settleApprovals(ctx, run, e.gate, true); err != nil {
		return err
	}
	done, _, err := e.close(ctx, closing{fin: services.RunFinish{Status: services.RunInterrupted, Error: "the worker stopped mid-run (process restart or crash)"},
		steps: []closeStep{e.post(noticeParams(run, trigger, "My answer to this was interrupted (the server restarted). Send it again if you still need it.", services.RunInterrupted))}})
	if err != nil {
		return err
	}
	// Its children died with it.
	if kids, err := s.opts.Store.ListRuns(ctx, services.RunQuery{ParentRunID: run.ID, Status: services.RunRunning, Limit: 100}); err == nil {
		for _, k := range kids {
			_, _ = s.opts.Store.FinishRun(ctx, k.ID, services.RunFinish{Status: services.RunInterrupted, Error: "its parent run was interrupted"})
		}
	}
	if done.Status == services.RunInterrupted {
		s.publishRun(ctx, done, services.RunInterrupted)
		s.log.Warn("run interrupted", "run_id", run.ID, "timeline", run.TimelineScope)
	}
	return nil
}

// loop builds a main run's prompt and runs its model/tool loop.
func (e *execution) loop(ctx context.Context) mainOutcome {
	s, run, trigger := e.s, e.run, e.trigger
	s.transcribe(ctx, run, trigger)
	g := s.newGate(e.pol.starterOn(run.TimelineScope), run.ID, "")
	e.gate = g
	g.group = inGroup(trigger)
	if err := e.startTainted(ctx, s.startOrigin(ctx, run, trigger)); err != nil {
		return mainOutcome{err: err}
	}
	// A run resuming after the owner's decisions first settles the calls
	// it held: approved ones run (once), others get a result saying why not.
	if err := s.settleApprovals(ctx, run, g, false); err != nil {
		return mainOutcome{err: err}
	}
	defs, box := s.mainTools(run.TimelineScope, services.PolicyKey{Starter: g.starter, Tainted: g.origin != ""})
	built, err := s.opts.Context.Build(ctx, prompt.BuildParams{
		TimelineScope: run.TimelineScope, ContextScope: services.MainScope, TriggerID: trigger.ID, Trigger: &trigger, Tools: defs, Deferred: box.Groups(),
	})
	if err != nil {
		return mainOutcome{err: err}
	}
	obs := built.Inspection
	e.rules, e.rulesRead = built.Rules, built.RulesRead
	// Text of the prompt's history written under taint (an answer that
	// quoted a page, a summary of such turns, a handoff) taints the run
	// as the text itself did; the owner's new words stay the owner's.
	if obs.TaintedBy != "" {
		g.taintWith(ctx, obs.TaintedBy, obs.TaintSources)
	}
	if run.TimelineScope == services.DefaultTimeline {
		g.give(trigger.Content) // the owner's words (a stranger's are not)
	}
	s.logWarnings(run, obs)
	req := s.withSettled(built.Request, g)
	if r := trigger.Meta.Request; r != nil {
		req = s.applyTurnRequest(req, *r)
	}
	req.SystemContext += s.startingNote()
	first, err := s.recordPrompt(ctx, run.ID, obs, s.budgetCall(e.pol.budget, s.opts.LLM, req))
	if err != nil {
		return mainOutcome{obs: obs, err: err}
	}
	text, u, err := s.toolLoop(ctx, loopSpec{
		e: e, provider: s.opts.LLM, req: req, box: box, rec: mainRecorder{s: s, run: run, calls: e.startCalls()},
		call:  tools.Call{TimelineScope: run.TimelineScope, ContextScope: services.MainScope, RunID: run.ID},
		first: first,
	})
	return mainOutcome{answer: text, obs: obs, u: u, err: err}
}

// startingNote tells the model which MCP servers are still starting (right
// after the service starts, npx servers take seconds): their tools are
// missing from its list for now, and it should say so rather than do
// without them silently. Empty when every server is up or down for good.
func (s *Service) startingNote() string {
	if s.opts.Catalog == nil {
		return ""
	}
	_, servers := s.opts.Catalog.ToolCatalog()
	var starting []string
	for _, sv := range servers {
		if sv.State == "starting" {
			starting = append(starting, sv.Name)
		}
	}
	if len(starting) == 0 {
		return ""
	}
	return "\n\n## Tools still starting\n\nThe tool servers " + strings.Join(starting, ", ") +
		" are still starting, so their tools are not in your list yet. If the owner asks for something only they can do, say that these tools are starting and to ask again in a moment; /tools shows when they are up."
}

// applyTurnRequest applies what the trigger asks of its turn (an API
// client's settings) to the turn's model requests: the instruction closes
// the system content after the cached prefix, the sampling settings and the response format go with
// every model call, and the images (for a model that reads them) follow
// the trigger's text, which is the prompt's last user message.
func (s *Service) applyTurnRequest(req llm.Request, tr services.TurnRequest) llm.Request {
	if in := strings.TrimSpace(tr.Instruction); in != "" {
		req.SystemContext += "\n\n## Instruction of this request\n\nThe client that sent the next message asks, for this answer only:\n\n" + in
	}
	if tr.MaxTokens > 0 {
		req.MaxTokens = tr.MaxTokens
	}
	if tr.Temperature != nil {
		req.Temperature = tr.Temperature
	}
	req.Stop = tr.Stop
	req.ResponseFormat = tr.ResponseFormat
	if len(tr.Images) > 0 && s.opts.PassImages {
		msgs := append([]llm.Message(nil), req.Messages...)
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == llm.RoleUser {
				msgs[i].Images = append(append([]services.Image(nil), msgs[i].Images...), tr.Images...)
				break
			}
		}
		req.Messages = msgs
	}
	return req
}

// logWarnings logs a built prompt's warnings (CONTEXT_RULES_OVERBUDGET, …),
// which /context and the debug page show from the run's prompt step.
func (s *Service) logWarnings(run services.Run, ins prompt.Inspection) {
	for _, w := range ins.Warnings {
		s.log.Warn("prompt warning", "code", w.Code, "run_id", run.ID, "timeline", run.TimelineScope, "scope", run.ContextScope, "message", w.Message)
	}
}

// offeredTools are the tools of a conversation: every built-in tool, and
// MCP servers' tools on the owner's timeline (elsewhere only those of
// servers the operator marked shared).
func (s *Service) offeredTools(timeline string) []tools.Tool {
	if s.opts.Tools == nil {
		return nil
	}
	var out []tools.Tool
	for _, t := range s.opts.Tools.List() {
		if t.Source != "" && !t.Shared && timeline != services.DefaultTimeline {
			continue
		}
		out = append(out, t)
	}
	return out
}

// defaultKey is the policy key of a main run on timeline before it reads
// anything (the owner's, or a stranger's, which is tainted from its start).
func defaultKey(timeline string) services.PolicyKey {
	return services.PolicyKey{Starter: mainStarter(timeline), Tainted: timeline != services.DefaultTimeline}
}

// toolsFor are the tools offered to a run of k: those the policy does not
// deny there (a stranger is never offered a tool that lasts or leaves).
func (s *Service) toolsFor(timeline string, k services.PolicyKey) []tools.Tool {
	var out []tools.Tool
	for _, t := range s.offeredTools(timeline) {
		if s.offerable(t, k) {
			out = append(out, t)
		}
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// compact runs /compact [focus]: summarise the oldest whole turns of
// every written scope and tell the owner what happened.
func (e *execution) compact(ctx context.Context, focus string) error {
	s, run := e.s, e.run
	results, err := s.opts.Context.Compact(services.WithBudgetKind(ctx, services.BudgetMain), run.TimelineScope, services.MainScope, focus)
	fin := services.RunFinish{Status: services.RunOK}
	var b strings.Builder
	for _, r := range results {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "Scope %s: nothing to archive (%s).\n", r.Scope, r.Skipped)
		} else if r.Turns > 0 {
			fmt.Fprintf(&b, "Scope %s: archived %s (%s) into a %d-token summary.\n", r.Scope, services.Count(r.Turns, "turn", "turns"), services.Count(r.Messages, "message", "messages"), r.Tokens)
			if r.FreeForm {
				b.WriteString("(The model did not follow the summary template; its summary was kept as written.)\n")
			}
		}
	}
	if err != nil {
		fin.Status, fin.Error = services.RunError, err.Error()
		fmt.Fprintf(&b, "Compaction failed, nothing was moved: %s. Replies keep using the recent turns only.", services.ErrorMessage(err))
	}
	done, _, ferr := e.close(context.WithoutCancel(ctx), closing{fin: fin,
		steps: []closeStep{e.post(noticeParams(run, e.trigger, strings.TrimSpace(b.String()), fin.Status))}})
	if ferr != nil {
		return ferr
	}
	s.publishRun(ctx, done, fin.Status)
	return nil
}

// shouldCompact reports whether the timeline's main scope should be
// compacted after a run whose prompt was obs and whose last model call
// reported lastPrompt tokens (the prompt's estimate when the provider
// reports no usage): its history plus the next input (the oldest message
// queued behind the run, if any) reaches CONTEXT_COMPACT_AT of the
// working set, or the prompt plus that input reaches it of the window.
// The next input is only looked up when it could make the difference.
func (s *Service) shouldCompact(ctx context.Context, run services.Run, lastPrompt int, obs prompt.Inspection) bool {
	if lastPrompt == 0 {
		lastPrompt = obs.TotalTokens
	}
	if s.opts.Context.WorkingSetFull(obs, 0) || s.opts.Context.ShouldCompact(lastPrompt, 0) {
		return true
	}
	if !s.opts.Context.WorkingSetFull(obs, prompt.MaxInputTokens) && !s.opts.Context.ShouldCompact(lastPrompt, prompt.MaxInputTokens) {
		return false
	}
	next, err := s.opts.Store.NextQueuedRun(ctx, run.TimelineScope)
	if err != nil {
		return false
	}
	msg, err := s.opts.Store.GetMessage(ctx, next.TriggerMessageID)
	if err != nil {
		return false
	}
	n := msg.TokenCount
	if n == 0 {
		n = s.opts.Tokenizer.Count(msg.Content)
	}
	return s.opts.Context.WorkingSetFull(obs, n) || s.opts.Context.ShouldCompact(lastPrompt, n)
}

// ExecuteCompaction runs a compaction job (services.CompactionExecutor):
// the main scope (every summary scope main prompts read) or one other
// scope (a schedule's). A failure moves nothing and is told to the owner
// once; the next trigger tries again. Cut short by this process stopping,
// it returns the context's error, so the job runs again elsewhere.
func (s *Service) ExecuteCompaction(ctx context.Context, timeline, scope, key string) error {
	s.autoCompact(ctx, timeline, scope, "compaction:"+key)
	return ctx.Err()
}

// autoCompact archives old turns of a scope. A failure moves nothing and
// is told to the owner once (dedupe key from key).
func (s *Service) autoCompact(ctx context.Context, timeline, scope, key string) {
	ctx = services.WithBudgetKind(ctx, services.ScopeBudgetKind(scope))
	var results []prompt.CompactResult
	var err error
	if scope == services.MainScope {
		results, err = s.opts.Context.Compact(ctx, timeline, services.MainScope, "")
	} else {
		var r prompt.CompactResult
		r, err = s.opts.Context.CompactScope(ctx, timeline, scope)
		results = append(results, r)
	}
	for _, r := range results {
		s.log.Info("compacted", "timeline", timeline, "scope", r.Scope, "turns", r.Turns, "until_id", r.UntilID, "skipped", r.Skipped, "free_form", r.FreeForm)
	}
	if err == nil {
		return
	}
	s.log.Warn("compaction failed", "timeline", timeline, "scope", scope, "err", err)
	if scope != services.MainScope || ctx.Err() != nil {
		return // a schedule's scope: its fires go on with their recent turns
	}
	_, _, perr := s.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: timeline, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content:   "I could not archive older messages into a summary (" + services.ErrorMessage(err) + "). Nothing was lost; replies use the recent turns only until the next try.",
		DedupeKey: key + ":failed",
		Metadata:  services.MessageMeta{Notice: "compaction_failed"}.Encode(),
	})
	if perr != nil {
		s.log.Error("post compaction notice", "err", perr)
	}
}
