package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/tools"
)

// FireLimits bound one fire of a schedule.
type FireLimits struct {
	// MaxSteps bounds model calls per fire (default 8).
	MaxSteps int
	// Timeout bounds one fire (default 5 minutes).
	Timeout time.Duration
	// MaxTokens bounds the tokens (prompt and completion) one fire may use
	// (default 60,000).
	MaxTokens int
}

func (l *FireLimits) defaults() {
	if l.MaxSteps <= 0 {
		l.MaxSteps = 8
	}
	if l.Timeout <= 0 {
		l.Timeout = 5 * time.Minute
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = 60000
	}
}

// notForFires are tools a fire is not offered: a fire does not start
// sub-agents (their handoffs go to main) nor create or change schedules.
var notForFires = map[string]bool{"delegate": true, "schedule": true, "update_schedule": true, "cancel_schedule": true}

// fireRun is a schedule's fire in execution: the schedule, its fire in the
// ledger, the task as its model reads it and, for a watch, what it read.
type fireRun struct {
	*execution
	sc      services.Schedule
	fire    services.ScheduleFire
	at      time.Time
	input   string
	watched *services.WatchContent
}

// ExecuteFire runs the fire of schedule id due at at (the queue's worker
// holds the schedule's lock): it begins the fire in the ledger (which
// advances the schedule and enqueues its next fire), runs the task in the
// schedule's own scope with invisible steps, then, in one transaction,
// closes the run, records the fire's end and, when the policy says so,
// posts the notification to the owner's timeline and channels. A fire that
// already ran or is no longer due is left alone.
func (s *Service) ExecuteFire(ctx context.Context, id int64, at time.Time) error {
	if s.opts.Fires == nil {
		return services.Errorf(services.EUNAVAILABLE, "schedules are not configured")
	}
	f := &fireRun{execution: s.newExecution(kindFire, services.Run{}, services.Message{}), at: at}
	err := s.retryConflict(ctx, func(tx services.Tx) error {
		var err error
		if f.sc, f.fire, err = s.opts.Fires.BeginFireTx(ctx, tx, id, at); err != nil {
			return err
		}
		if f.sc.Watch != nil {
			return nil // its run starts after the pre-check, if at all
		}
		f.input = s.fireInput(f.sc, at)
		f.run, err = s.startFireRun(ctx, tx, f.sc, &f.fire, f.input, "")
		return err
	})
	if services.IsKind(err, services.ENOTFOUND) {
		s.log.Info("fire skipped", "schedule_id", id, "fire_at", at, "reason", services.ErrorMessage(err))
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Info("fire started", "schedule_id", f.sc.ID, "fire_id", f.fire.ID, "run_id", f.run.ID, "timeline", f.sc.TimelineScope)
	// A watch fire's run is made after the pre-check: it is not known by
	// its id (a fire delegates nothing).
	fctx, release := f.begin(ctx)
	defer release()
	if f.sc.Watch != nil {
		if done, err := f.precheck(ctx, fctx); done || err != nil {
			return err
		}
	}
	answer, u, runErr := f.loop(fctx)
	u.include(f.inline.total()) // tasks the fire delegated inline
	if runErr == nil && s.fireProvider(f.sc).Name() == llm.ProviderOffline {
		// The offline model's answer says how to configure a model: no
		// task was done. A reminder still reminds; a monitor fails (and
		// pauses, telling the owner why).
		runErr = services.Errorf(services.EUNAVAILABLE, "no language model is configured (LLM_PROVIDER)")
	}
	if runErr != nil && ctx.Err() != nil {
		// This process is shutting down: the reaper closes the fire as
		// interrupted, the next fire is already scheduled.
		return ctx.Err()
	}
	timedOut := errors.Is(context.Cause(fctx), context.DeadlineExceeded)
	result := services.FireResult{Status: services.FireOK, Answer: answer, Watch: f.watched}
	if f.watched != nil {
		result.News, result.Answer = watchVerdict(answer)
	}
	switch {
	case runErr == nil:
	case services.ErrorCode(runErr) == services.CodeBudgetExceeded:
		// Ended as skipped (budget), not failed: it does not count towards
		// pausing the schedule.
		result = services.FireResult{Status: services.FireSkipped, Error: "skipped: budget (" + services.ErrorMessage(runErr) + ")", Watch: f.watched}
	case timedOut:
		result = services.FireResult{Status: services.FireError, Error: fmt.Sprintf("it took longer than %s", f.lim.timeout), Watch: f.watched}
	default:
		result = services.FireResult{Status: services.FireError, Error: services.ErrorMessage(runErr), Watch: f.watched}
	}
	return f.end(ctx, u, result, result.Status == services.FireError && timedOut)
}

// precheck is a watch fire's deterministic pre-check: the watched
// content, read without the model. Unchanged (or unreadable): the fire
// ends here, 0 model calls (done). Changed: its run starts, tainted by
// the page its input carries.
func (f *fireRun) precheck(ctx, fctx context.Context) (done bool, err error) {
	s, sc := f.s, f.sc
	content, werr := s.readWatch(fctx, sc)
	switch {
	case werr != nil && ctx.Err() != nil:
		return true, ctx.Err()
	case werr != nil:
		return true, f.end(ctx, usage{}, services.FireResult{Status: services.FireError,
			Error: "could not read the watched page: " + services.ErrorMessage(werr)}, false)
	case sc.WatchHash != "" && content.Hash == sc.WatchHash:
		return true, f.end(ctx, usage{}, services.FireResult{Status: services.FireUnchanged, Watch: &content}, false)
	}
	f.watched = &content
	origin := watchOrigin(*sc.Watch, content).String()
	f.input = s.watchInput(sc, f.at, content)
	err = s.retryConflict(ctx, func(tx services.Tx) error {
		fire := f.fire
		run, err := s.startFireRun(ctx, tx, sc, &fire, f.input, origin)
		if err == nil {
			f.fire, f.run = fire, run
		}
		return err
	})
	if err != nil {
		return true, err
	}
	s.log.Info("watch changed", "schedule_id", sc.ID, "fire_id", f.fire.ID, "run_id", f.run.ID, "first", sc.WatchHash == "")
	return false, nil
}

// startFireRun creates, in tx, a fire's run (and, scoped, its input row in
// the schedule's scope) and links it to the fire. taintedBy starts the run
// tainted (a watch fire's input carries the page).
func (s *Service) startFireRun(ctx context.Context, tx services.Tx, sc services.Schedule, fire *services.ScheduleFire, input, taintedBy string) (services.Run, error) {
	scope := s.mainScope()
	scoped := s.opts.Flags.ScopedRead
	if scoped {
		scope = sc.Scope()
	}
	nr := services.NewRun{TimelineScope: sc.TimelineScope, ContextScope: scope, AgentID: services.ScheduleAgent,
		Source: services.SourceSchedule, Status: services.RunRunning, Model: s.fireProvider(sc).Model(), TaintedBy: taintedBy}
	if scoped {
		// The fire's input is the first row of its turn in the schedule's
		// scope: the next fires read it back with what this one found.
		trigger, _, err := tx.InsertMessage(ctx, services.NewMessage{
			TimelineScope: sc.TimelineScope, ContextScope: scope, Role: services.RoleUser, Source: services.SourceSchedule,
			AgentID: services.ScheduleAgent, Content: input, Visible: false, TokenCount: s.opts.Tokenizer.Count(input),
			DedupeKey: fmt.Sprintf("fire:%d:input", fire.ID),
			Metadata:  services.MessageMeta{ScheduleID: sc.ID, ScheduleName: sc.Name, TaintedBy: taintedBy}.Encode(),
		})
		if err != nil {
			return services.Run{}, err
		}
		nr.TriggerMessageID = trigger.ID
	}
	run, err := tx.CreateRun(ctx, nr)
	if err != nil {
		return run, err
	}
	fire.RunID = run.ID
	return run, tx.UpdateFire(ctx, *fire)
}

// end closes a fire: in one transaction its run's end (when it had one),
// the ledger's end (notify policy, failures, the watch's content) and the
// notification; then the announcements, the schedule scope's compaction
// and the metrics.
func (f *fireRun) end(ctx context.Context, u usage, result services.FireResult, timedOut bool) error {
	s, run := f.s, f.run
	result.Tokens, result.ModelCalls = u.prompt+u.completion, u.calls
	fin := services.RunFinish{Status: services.RunOK, PromptTokens: u.prompt, CompletionTokens: u.completion, CachedTokens: u.cached}
	switch result.Status {
	case services.FireSkipped, services.FireError:
		fin.Status, fin.Error = services.RunError, result.Error
		if timedOut {
			fin.Status = services.RunTimeout
		}
	}
	endCtx := context.WithoutCancel(ctx)
	var decision services.FireDecision
	ledger := func(ctx context.Context, tx services.Tx, c *closed) error {
		var err error
		decision, err = f.endLedger(ctx, tx, c, result)
		return err
	}
	if _, _, err := f.close(endCtx, closing{fin: fin, steps: []closeStep{ledger}}); err != nil {
		return err
	}
	if run.ID != 0 && s.opts.Flags.ScopedRead && result.Status == services.FireOK && s.opts.Context.ShouldCompact(u.last, s.opts.Tokenizer.Count(f.sc.Task)) {
		// The schedule's own summary cursor: its oldest fires become a
		// summary its later fires read. As a job of its own, so the
		// schedule's lock is not held for it.
		_, after := f.compaction(endCtx, f.sc.Scope(), fmt.Sprintf("fire:%d", f.fire.ID))
		after()
	}
	if s.opts.FireObserved != nil {
		label := string(result.Status)
		if result.Status == services.FireOK && decision.Notify {
			label = "notified"
		}
		s.opts.FireObserved(label)
	}
	s.log.Info("fire finished", "schedule_id", f.sc.ID, "fire_id", f.fire.ID, "run_id", run.ID, "status", result.Status,
		"model_calls", result.ModelCalls, "tokens", result.Tokens,
		"notified", decision.Notify, "paused", decision.Paused, "duration_ms", time.Since(f.started).Milliseconds())
	return nil
}

// endLedger is the fire's part of its end's transaction (c holds the run
// as closed): the ledger's end and the step that records it, then the
// notification and the pause notice the ledger decided.
func (f *fireRun) endLedger(ctx context.Context, tx services.Tx, c *closed, result services.FireResult) (services.FireDecision, error) {
	s, run := f.s, f.run
	// The notification carries the fire's taint: a later prompt that
	// includes it starts tainted.
	taint := run.TaintedBy
	if c.run.TaintedBy != "" {
		taint = c.run.TaintedBy
	}
	sc, ended, decision, err := s.opts.Fires.EndFireTx(ctx, tx, f.sc.ID, f.fire, result)
	if err != nil {
		return decision, err
	}
	f.sc = sc
	if run.ID != 0 {
		step := map[string]any{"status": result.Status, "notify": decision.Notify, "message": decision.Message, "error": result.Error, "paused": decision.Paused}
		if result.Watch != nil {
			step["news"], step["content_hash"] = result.News, result.Watch.Hash
		}
		if _, err := tx.AppendStep(ctx, run.ID, services.StepKind("fire_result"), mustJSON(step)); err != nil {
			return decision, err
		}
	}
	if decision.Notify {
		msg, err := f.postNotice(ctx, tx, "notify", "⏰ **"+sc.Name+"**\n\n"+decision.Message, taint)
		if err != nil {
			return decision, err
		}
		c.add(msg, true)
		ended.MessageID = msg.ID
		if err := tx.UpdateFire(ctx, ended); err != nil {
			return decision, err
		}
	}
	if decision.Paused {
		msg, err := f.postNotice(ctx, tx, "paused", decision.PauseNotice, "")
		if err != nil {
			return decision, err
		}
		c.add(msg, true)
	}
	return decision, nil
}

// retryConflict runs fn in a transaction, again when the schedule changed
// under it (ECONFLICT from a versioned update), a few times.
func (s *Service) retryConflict(ctx context.Context, fn func(tx services.Tx) error) error {
	var err error
	for range 5 {
		if err = s.opts.Store.Transact(ctx, fn); !services.IsKind(err, services.ECONFLICT) {
			return err
		}
	}
	return err
}

// postNotice posts the schedule's message to the owner's timeline
// (visible in main, delivered to every channel of the owner), once per
// fire and kind; taintedBy marks text a tainted fire wrote.
func (f *fireRun) postNotice(ctx context.Context, tx services.Tx, kind, text, taintedBy string) (services.Message, error) {
	sc := f.sc
	msg, _, err := f.s.opts.Chat.PostTx(ctx, tx, services.PostParams{
		TimelineScope: sc.TimelineScope, Source: services.SourceSchedule, Role: services.RoleAssistant,
		Content: text, DedupeKey: fmt.Sprintf("fire:%d:%s", f.fire.ID, kind), NotifyOwner: true,
		// No run id: the fire's steps stay out of the owner's view (the
		// page shows a run's tool calls under its answer); the fire row
		// links the two for the debug page.
		Metadata: services.MessageMeta{Kind: services.MetaScheduleNotice, ScheduleID: sc.ID, ScheduleName: sc.Name, TaintedBy: taintedBy}.Encode(),
	})
	return msg, err
}

// InterruptFire closes a fire whose worker died: its run and the fire end
// interrupted (the owner is not told; the fire is counted on the schedule
// and shown on /schedules and the debug page).
func (s *Service) InterruptFire(ctx context.Context, f services.ScheduleFire) error {
	// Read again under the schedule's lock: another reaper may have
	// closed it since it was listed.
	f, err := s.opts.Store.GetFire(ctx, f.ScheduleID, f.FireAt)
	if err != nil || f.Status != services.FireRunning {
		return err
	}
	if f.RunID != 0 {
		if _, err := s.opts.Store.FinishRun(ctx, f.RunID, services.RunFinish{Status: services.RunInterrupted,
			Error: "the worker stopped mid-fire (process restart or crash)"}); err != nil && !services.IsKind(err, services.ECONFLICT) {
			return err
		}
	}
	now := time.Now()
	f.Status, f.Error, f.FinishedAt = services.FireInterrupted, "the server stopped during this fire; it is not run again", &now
	if err := s.opts.Store.UpdateFire(ctx, f); err != nil {
		return err
	}
	if s.opts.FireObserved != nil {
		s.opts.FireObserved(string(services.FireInterrupted))
	}
	s.log.Warn("fire interrupted", "schedule_id", f.ScheduleID, "fire_id", f.ID, "run_id", f.RunID)
	return nil
}

// fireProvider is the model of a schedule's fires: its profile's, or the
// main one.
func (s *Service) fireProvider(sc services.Schedule) llm.Provider {
	return s.profileLLM(sc.Profile)
}

// fireInput is the task as the fire's model reads it: what to do, when it
// was due in the owner's zone, and how to answer under the notify policy.
func (s *Service) fireInput(sc services.Schedule, at time.Time) string {
	loc := s.opts.Fires.Location(sc)
	var b strings.Builder
	fmt.Fprintf(&b, "Scheduled task %q (schedule #%d), due %s; it is now %s.\n", sc.Name, sc.ID,
		at.In(loc).Format("Mon 2006-01-02 15:04 MST"), time.Now().In(loc).Format("Mon 2006-01-02 15:04 MST"))
	b.WriteString("The owner does not see this conversation; your final answer decides what they hear.\n\n")
	b.WriteString("Task: " + sc.Task + "\n\n")
	switch sc.Notify {
	case services.NotifyAlways:
		b.WriteString("Answer with the message for the owner (a reminder: short and self-contained).")
	case services.NotifyOnFinding:
		b.WriteString("Do the task now with your tools. If you found what the task looks for, answer with a short, self-contained message for the owner. Otherwise answer exactly " + services.NothingNew + ".")
	default:
		b.WriteString("Do the task now with your tools. Answer with a short, self-contained message for the owner stating what you found. If there is nothing the owner needs to hear, answer exactly " + services.NothingNew + ". The owner is told only when your message differs from the last one they got")
		if sc.LastNotified != "" {
			b.WriteString(", which was:\n\n" + truncateText(sc.LastNotified, 1500))
		} else {
			b.WriteString(" (they have had none from this schedule yet).")
		}
	}
	return b.String()
}

// loop runs a fire's model/tool loop. Scoped (AGENT_CONTEXT_SCOPED_READ
// =1) its prompt is the schedule's own scope (its earlier fires, with the
// owner's rules and settings) and its rows are kept there, hidden; with
// scoped reads off it runs single-space: the prompt is the main
// conversation's with the task appended, and only its steps are recorded.
func (f *fireRun) loop(ctx context.Context) (string, usage, error) {
	s, sc, run, input := f.s, f.sc, f.run, f.input
	var all []tools.Tool
	var core []string
	profile, hasProfile := s.opts.Profiles[sc.Profile]
	// A watch fire starts tainted by the page its input carries.
	key := services.PolicyKey{Starter: f.pol.starterOn(sc.TimelineScope), Tainted: run.TaintedBy != ""}
	for _, t := range s.toolsFor(sc.TimelineScope, key) {
		if notForFires[t.Name] || hasProfile && len(profile.Tools) > 0 && !profileAllows(profile.Tools, t.Name) {
			continue
		}
		all = append(all, t)
	}
	if hasProfile && len(profile.Tools) > 0 {
		core = profile.Tools
	}
	defs, box := s.selectTools(all, core)
	scoped := s.opts.Flags.ScopedRead
	bp := prompt.BuildParams{TimelineScope: sc.TimelineScope, ContextScope: services.MainScope, Tools: defs, Deferred: box.Groups()}
	if scoped {
		bp.ContextScope, bp.TriggerID = sc.Scope(), run.TriggerMessageID
	}
	built, err := s.opts.Context.Build(ctx, bp)
	if err != nil {
		return "", usage{}, err
	}
	req := built.Request
	if !scoped {
		// The task as the current input, with the date, time and channel
		// a built input carries.
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: s.opts.Context.InputHeader(services.SourceSchedule) + "\n\n" + input})
	}
	if hasProfile && profile.SystemPrompt != "" {
		req.System = profile.SystemPrompt + "\n\n" + req.System
	}
	obs := built.Inspection
	s.logWarnings(run, obs)
	provider := s.fireProvider(sc)
	first, err := s.recordPrompt(ctx, run.ID, obs, s.budgetCall(f.pol.budget, provider, req))
	if err != nil {
		return "", usage{}, err
	}
	rec := &childRecorder{s: s, timeline: sc.TimelineScope, scope: sc.Scope(), agentID: services.ScheduleAgent, childID: run.ID,
		store: scoped, replyTo: run.TriggerMessageID}
	g := s.newGate(key.Starter, run.ID, run.TaintedBy)
	f.gate = g
	g.give(sc.Task) // the owner's (or owner-approved) task: its URLs are the owner's
	if obs.TaintedBy != "" {
		// Its prompt carries text written under taint (the main
		// conversation's, or an earlier fire's read back).
		g.taintWith(ctx, obs.TaintedBy, obs.TaintSources)
	}
	return s.toolLoop(ctx, loopSpec{
		e: f.execution, provider: provider, req: req, box: box, rec: rec,
		call:  tools.Call{TimelineScope: sc.TimelineScope, ContextScope: run.ContextScope, RunID: run.ID},
		first: first,
	})
}
