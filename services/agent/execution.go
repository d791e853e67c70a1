package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/services"
)

// Run kinds: a main run answering a message, a child run (a delegated task
// in its own run and scope), a delegated task run inline in main
// (sub-agents off), a schedule's fire, and a /compact run.
const (
	kindMain       = "main"
	kindChild      = "child"
	kindInline     = "inline"
	kindFire       = "fire"
	kindCompaction = "compaction"
)

// conflict is what the end of an execution does when its run was closed
// meanwhile (by /stop or the reaper racing it).
type conflict int

const (
	// conflictKeep: the other end stays; nothing is posted.
	conflictKeep conflict = iota
	// conflictFail: the end fails with ECONFLICT.
	conflictFail
	// conflictCarryOn: the rest of the end commits anyway, the transaction
	// retried a few times when what it versions changed under it.
	conflictCarryOn
)

// observe is when the run observers (services.RunObserver) hear of a run.
type observe int

const (
	observeNone observe = iota
	// observeRun: started with the execution, finished when it returns.
	observeRun
	// observeEnd: finished, with the closed run, once its end committed.
	observeEnd
)

// runLimits bound one execution.
type runLimits struct {
	steps   int
	timeout time.Duration
	// tokens, when positive, bounds the tokens (prompt and completion)
	// its loop may use.
	tokens int
}

// runPolicy is what differs between the kinds of run; the start, the
// model/tool loop and the end are written once (execution) and consult it.
type runPolicy struct {
	kind string
	// starter is who starts it on the owner's timeline, for the policy
	// table (on a stranger's timeline every run is the stranger's).
	starter services.Starter
	// budget is the daily budget its model calls count against.
	budget services.BudgetKind
	// who names it in the errors it ends with.
	who string
	// origin marks its steps (delegated work, a fire).
	origin services.StepOrigin
	// ownRun: it has a run of its own (inline work records on its parent's).
	ownRun bool
	// sharesGate: it works under its parent's provenance (inline work).
	sharesGate bool
	// waits: a call the policy asks about holds the run, which ends
	// 'waiting' for the owner; otherwise the owner is asked detached and
	// the loop carries on without the call.
	waits bool
	// parallel: one step's calls run side by side.
	parallel bool
	// streams: the answer and the tool activity are streamed to clients,
	// and the run's status is published.
	streams bool
	// stoppable: /stop cancels it.
	stoppable bool
	// answerStepWithEnd: the answering model call's step is stored in the
	// end's transaction (with the answer), one commit fewer per turn.
	answerStepWithEnd bool
	// noteEmpty: an empty answer is replaced by a note saying so.
	noteEmpty bool
	// closesOpenCalls: its end gives every call left without a result one
	// (its rows are prompted again).
	closesOpenCalls bool
	// compactWithEnd: the compaction its end triggers is enqueued in the
	// end's transaction (else after it, a failure only logged).
	compactWithEnd bool
	// visible says what the owner is shown of its end.
	visible string
	conflict
	observe
	limits func(o *options) runLimits
}

// runPolicies is the table of run kinds. Adding a kind adds a row here, its
// start and loop (what it reads, where it writes), and its end's steps.
var runPolicies = map[string]runPolicy{
	kindMain: {kind: kindMain, starter: services.StarterOwner, budget: services.BudgetMain, who: "the agent",
		ownRun: true, waits: true, parallel: true, streams: true, stoppable: true, answerStepWithEnd: true, noteEmpty: true,
		closesOpenCalls: true, compactWithEnd: true, visible: "its answer or a notice, in main",
		conflict: conflictKeep, observe: observeRun,
		limits: func(o *options) runLimits { return runLimits{steps: o.MaxSteps, timeout: o.RunTimeout} }},
	kindChild: {kind: kindChild, starter: services.StarterSubagent, budget: services.BudgetSubagent, who: "the sub-agent",
		origin: services.StepOrigin{Child: true}, ownRun: true, visible: "a handoff marker in main; the handoff is the delegate call's result",
		conflict: conflictFail, observe: observeEnd,
		limits: func(o *options) runLimits {
			return runLimits{steps: o.SubAgents.MaxSteps, timeout: o.SubAgents.Timeout}
		}},
	kindInline: {kind: kindInline, starter: services.StarterSubagent, budget: services.BudgetMain, who: "the sub-agent",
		origin: services.StepOrigin{Inline: true}, sharesGate: true, visible: "nothing; the handoff is the delegate call's result",
		observe: observeNone,
		limits: func(o *options) runLimits {
			return runLimits{steps: o.SubAgents.MaxSteps, timeout: o.SubAgents.Timeout}
		}},
	kindFire: {kind: kindFire, starter: services.StarterSchedule, budget: services.BudgetSchedule, who: "the scheduled task",
		origin: services.StepOrigin{Schedule: true}, ownRun: true, visible: "a notification as the schedule's notify policy says, or a pause notice",
		conflict: conflictCarryOn, observe: observeEnd,
		limits: func(o *options) runLimits {
			return runLimits{steps: o.Fire.MaxSteps, timeout: o.Fire.Timeout, tokens: o.Fire.MaxTokens}
		}},
	kindCompaction: {kind: kindCompaction, starter: services.StarterOwner, who: "the compaction",
		ownRun: true, streams: true, closesOpenCalls: true, visible: "a notice of what was archived, in main",
		conflict: conflictKeep, observe: observeNone,
		limits: func(o *options) runLimits { return runLimits{} }},
}

// starterOn is who starts a run of this kind on timeline.
func (p runPolicy) starterOn(timeline string) services.Starter {
	if timeline != services.DefaultTimeline {
		return services.StarterStranger
	}
	return p.starter
}

// execution is one run of some kind from its start to its end: the run its
// steps are recorded on, the policy of its kind, its provenance (gate),
// and what its end needs.
type execution struct {
	s   *Service
	pol runPolicy
	lim runLimits
	// run is the run its steps are recorded on (inline work: its parent's).
	run services.Run
	// trigger is the message it answers (what the observers are told).
	trigger services.Message
	gate    *gate
	started time.Time
	// lastStep, for a main run, is the recording of the answering call's
	// step, stored in the transaction that stores the answer.
	lastStep func(tx services.Tx) error
	// rules, when rulesRead, are the timeline's rules as its prompt was
	// built with: its answer is checked against them (checkAnswer).
	rules     []services.Constraint
	rulesRead bool
	// answerSettle is the answering call's budget settlement, made in the
	// same transaction (finishSettle completes it).
	answerSettle *pendingSettle
	// inline sums the usage of the tasks it ran inline: its run pays for
	// them. payer, for inline work, is the execution that pays for it.
	inline inlineUsage
	payer  *execution
	// calls, once its main loop started (startCalls), says whether the
	// loop stored a row with tool calls: with none, its end has no open
	// call to look for.
	calls *atomic.Bool
}

// startCalls starts tracking the rows with tool calls the loop stores.
func (e *execution) startCalls() *atomic.Bool {
	e.calls = new(atomic.Bool)
	return e.calls
}

// mayHaveOpenCalls says whether its end must look for calls left open.
func (e *execution) mayHaveOpenCalls() bool { return e.calls == nil || e.calls.Load() }

func (s *Service) newExecution(kind string, run services.Run, trigger services.Message) *execution {
	pol := runPolicies[kind]
	return &execution{s: s, pol: pol, lim: pol.limits(&s.opts), run: run, trigger: trigger, started: time.Now()}
}

// begin starts the execution: bounded by its limits, cancellable by /stop
// when its kind is, known to the delegate tool by its run id, and the
// observers told. end releases it (always call it).
func (e *execution) begin(ctx context.Context) (context.Context, func()) {
	s := e.s
	if e.pol.observe == observeRun {
		for _, o := range s.opts.Observers {
			o.RunStarted(ctx, e.run, e.trigger)
		}
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	cancelTimeout := func() {}
	if e.lim.timeout > 0 {
		runCtx, cancelTimeout = context.WithTimeoutCause(runCtx, e.lim.timeout, context.DeadlineExceeded)
	}
	s.mu.Lock()
	if e.pol.stoppable {
		s.active[e.run.ID] = cancel
	}
	if e.pol.ownRun && e.run.ID != 0 {
		if s.execs == nil {
			s.execs = map[int64]*execution{}
		}
		s.execs[e.run.ID] = e
	}
	s.mu.Unlock()
	return runCtx, func() {
		s.mu.Lock()
		if e.pol.stoppable {
			delete(s.active, e.run.ID)
			delete(s.childSlots, e.run.ID)
		}
		if s.execs[e.run.ID] == e {
			delete(s.execs, e.run.ID)
		}
		s.mu.Unlock()
		cancel(nil)
		cancelTimeout()
		if e.pol.observe == observeRun {
			for _, o := range s.opts.Observers {
				o.RunFinished(context.WithoutCancel(ctx), e.run, e.trigger)
			}
		}
	}
}

// executionOf is the execution of run id in this process (nil: none).
func (s *Service) executionOf(id int64) *execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs[id]
}

// startTainted marks the execution tainted from its start by origin and
// records it on the run, unless the run has it already.
func (e *execution) startTainted(ctx context.Context, origin string) error {
	if origin == "" {
		return nil
	}
	e.gate.start(origin)
	if e.run.TaintedBy != "" {
		return nil
	}
	return e.gate.record(ctx, origin)
}

// inlineUsage sums the usage of the tasks an execution ran inline
// (sub-agents off): their model calls are made for its run, so the run's
// usage (stored, on /context, /metrics and in the /v1 usage object)
// includes them. Tasks delegated in parallel add to it at once.
type inlineUsage struct {
	mu sync.Mutex
	u  usage
}

func (iu *inlineUsage) add(x usage) {
	iu.mu.Lock()
	defer iu.mu.Unlock()
	iu.u.include(x)
}

func (iu *inlineUsage) total() usage {
	iu.mu.Lock()
	defer iu.mu.Unlock()
	return iu.u
}

// pay adds inline work's usage to the execution that pays for it.
func (e *execution) pay(u usage) {
	if e.payer != nil {
		e.payer.inline.add(u)
	}
}

// closing is what an execution's end commits together with its run's end:
// steps run in the transaction after the run is closed.
type closing struct {
	fin   services.RunFinish
	steps []closeStep
	// keepOpenCalls: the calls left without a result stay so (a run
	// ending 'waiting' holds them).
	keepOpenCalls bool
}

// closeStep is one step of an end's transaction.
type closeStep func(ctx context.Context, tx services.Tx, c *closed) error

// closed is what an end committed: the run as closed (zero when it had
// none, or it was closed elsewhere and the end carried on) and the
// messages it posted, announced once it commits.
type closed struct {
	run     services.Run
	posted  []services.Message
	created []bool
}

func (c *closed) add(msg services.Message, created bool) {
	c.posted, c.created = append(c.posted, msg), append(c.created, created)
}

// post posts p in the end's transaction.
func (e *execution) post(p services.PostParams) closeStep {
	return func(ctx context.Context, tx services.Tx, c *closed) error {
		msg, created, err := e.s.opts.Chat.PostTx(ctx, tx, p)
		if err == nil {
			c.add(msg, created)
		}
		return err
	}
}

// close ends the execution: in one transaction its run is closed with
// c.fin (and, where its kind says, the calls left open get their result)
// and c's steps run; once committed, what they posted is announced and the
// observers told. A run closed meanwhile is handled as its kind says
// (runPolicy.conflict); ok is false when the end did not commit for that.
func (e *execution) close(ctx context.Context, c closing) (done services.Run, ok bool, err error) {
	s := e.s
	var out closed
	body := func(tx services.Tx) error {
		out = closed{}
		if e.pol.ownRun && e.run.ID != 0 {
			run, err := tx.FinishRun(ctx, e.run.ID, c.fin)
			switch {
			case err == nil:
				out.run = run
			case e.pol.conflict != conflictCarryOn || !services.IsKind(err, services.ECONFLICT):
				return err
			}
		}
		if e.pol.closesOpenCalls && !c.keepOpenCalls && e.mayHaveOpenCalls() {
			if err := s.closeOpenCalls(ctx, tx, e.run, c.fin.Status); err != nil {
				return err
			}
		}
		for _, step := range c.steps {
			if step == nil {
				continue
			}
			if err := step(ctx, tx, &out); err != nil {
				return err
			}
		}
		return nil
	}
	if e.pol.conflict == conflictCarryOn {
		err = s.retryConflict(ctx, body)
	} else {
		err = s.opts.Store.Transact(ctx, body)
	}
	if e.pol.conflict == conflictKeep && services.IsKind(err, services.ECONFLICT) {
		cur, gerr := s.opts.Store.GetRun(ctx, e.run.ID)
		return cur, false, gerr
	}
	if err != nil {
		return services.Run{}, false, err
	}
	if out.run.ID != 0 && out.run.ID == e.run.ID {
		// The observers told at release hear how it ended without reading
		// it again.
		e.run = out.run
	}
	for i, m := range out.posted {
		s.opts.Chat.Announce(ctx, m, out.created[i])
	}
	if e.pol.observe == observeEnd && e.run.ID != 0 {
		if cur, err := s.opts.Store.GetRun(ctx, e.run.ID); err == nil {
			for _, o := range s.opts.Observers {
				o.RunFinished(ctx, cur, e.trigger)
			}
		}
	}
	return out.run, true, nil
}

// compaction is the compaction of scope an end triggers: a job enqueued in
// the end's transaction (inTx) when its kind says so, else after it (a
// failure logged); without a job queue, compacted right after the end.
func (e *execution) compaction(ctx context.Context, scope, key string) (inTx closeStep, after func()) {
	s := e.s
	timeline := e.run.TimelineScope
	switch {
	case s.opts.Compactions == nil:
		return nil, func() { s.autoCompact(ctx, timeline, scope, key) }
	case e.pol.compactWithEnd:
		return func(ctx context.Context, tx services.Tx, _ *closed) error {
			return s.opts.Compactions.EnqueueCompactionTx(ctx, tx, timeline, scope)
		}, func() {}
	}
	return nil, func() {
		if err := s.opts.Compactions.EnqueueCompaction(ctx, timeline, scope); err != nil {
			s.log.Warn("schedule scope compaction not scheduled", "run_id", e.run.ID, "scope", scope, "err", err)
		}
	}
}
