package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/tools"
)

// recorder stores what one kind of loop keeps of its messages; the steps
// (model calls, tool calls and results) are recorded by the loop itself.
type recorder interface {
	// assistant stores the model's message that calls tools.
	assistant(ctx context.Context, resp *llm.Response) error
	// toolResultTx stores one call's result in tx, the transaction of
	// the result's step.
	toolResultTx(ctx context.Context, tx services.Tx, call services.ToolCall, res tools.Result) error
	// answer stores the final answer.
	answer(ctx context.Context, text string) error
}

// loopSpec is one model/tool loop of an execution: who answers, with what
// request and tools, and how its messages are kept. The execution says the
// rest: its policy, the run its steps are recorded on, its gate, limits.
type loopSpec struct {
	e        *execution
	provider llm.Provider
	req      llm.Request
	// box holds the run's deferred tools (nil: none); those it loads join
	// the next requests' tools after req's.
	box *tools.Toolbox
	// call is the template of every tool call (timeline, scope, run, depth).
	call tools.Call
	rec  recorder
	// first, when not nil, is the first call's reservation, made in the
	// run's prompt step's transaction.
	first *reservation
}

// stream is the run whose answer and tool activity are streamed to
// clients (nil: not streamed).
func (l loopSpec) stream() *services.Run {
	if !l.e.pol.streams {
		return nil
	}
	return &l.e.run
}

// stepRun is the run the loop's steps are recorded on.
func (l loopSpec) stepRun() int64 { return l.e.run.ID }

// cutError is a loop cut short (an error, /stop) with the text the model
// had written by then, which the owner may have seen streamed.
type cutError struct {
	err     error
	partial string
}

func (e *cutError) Error() string { return e.err.Error() }
func (e *cutError) Unwrap() error { return e.err }

// partialText is the text a cut loop had written, "" if none.
func partialText(err error) string {
	var c *cutError
	if errors.As(err, &c) {
		return strings.TrimSpace(c.partial)
	}
	return ""
}

// stepLimitError ends a loop that used its steps without answering; Partial
// is the last text the model wrote on the way, if any.
type stepLimitError struct {
	Who     string
	Steps   int
	Partial string
}

func (e *stepLimitError) Error() string {
	return fmt.Sprintf("%s used its %d steps without finishing", e.Who, e.Steps)
}

// toolLoop calls the model, runs the tools it asks for and feeds their
// results back, until it answers or the steps run out.
func (s *Service) toolLoop(ctx context.Context, l loopSpec) (string, usage, error) {
	var u usage
	e := l.e
	ctx = withGate(ctx, e.gate)
	// Inline work is paid for by the run it runs in.
	defer func() { e.pay(u) }()
	req := l.req
	partial := ""
	badInARow := 0
	// find_tools reads and loads this loop's deferred tools (an inline
	// task's loop has its own, never its parent's).
	ctx = tools.WithToolbox(ctx, l.box)
	for step := 0; step < e.lim.steps; step++ {
		var onDelta func(string)
		var stream *deltaStream
		if run := l.stream(); run != nil {
			stream = newDeltaStream(ctx, s.opts.Publisher, *run)
			onDelta = stream.add
		}
		// The exact request the provider sends is kept with the call's step.
		callCtx, capture := ctx, s.capture()
		if capture != nil {
			callCtx = llm.WithCapture(ctx, capture)
		}
		var held reservation
		if step == 0 && l.first != nil {
			held = *l.first
		} else {
			held = s.reserve(ctx, l, req)
		}
		if held.err != nil {
			return "", u, &cutError{err: held.err, partial: partial}
		}
		resp, err := l.provider.Complete(callCtx, req, onDelta)
		// A main run's answering call is settled with its answer.
		withEnd := err == nil && len(resp.ToolCalls) == 0 && e.pol.answerStepWithEnd
		switch {
		case err != nil:
			cut := ""
			if stream != nil {
				cut = stream.all.String()
			}
			s.settleCut(ctx, held, err, cut)
		case !withEnd:
			s.settleBudget(ctx, held, resp)
		}
		if stream != nil {
			stream.flush()
		}
		if err != nil {
			_, _ = s.appendCallStep(context.WithoutCancel(ctx), l, services.StepError, s.stepPayload(services.ErrorStep{
				Error: err.Error(), Code: services.ErrorCode(err), StepOrigin: l.origin()}), capture)
			if stream != nil && strings.TrimSpace(stream.all.String()) != "" {
				partial = stream.all.String()
			}
			return "", u, &cutError{err: err, partial: partial}
		}
		u.add(resp.Usage)
		u.truncated = resp.StopReason == llm.StopMaxTokens
		if max := e.lim.tokens; max > 0 && u.prompt+u.completion > max && len(resp.ToolCalls) > 0 {
			return "", u, &cutError{err: services.Errorf(services.ETOOLARGE, "%s used its budget of %d tokens (%d so far) without finishing", e.pol.who, max, u.prompt+u.completion), partial: resp.Text}
		}
		step := s.stepPayload(services.ModelCallStep{
			Model: resp.Model, StopReason: resp.StopReason, Usage: resp.Usage,
			TextChars: len(resp.Text), ToolCalls: len(resp.ToolCalls), StepOrigin: l.origin()})
		if len(resp.ToolCalls) == 0 && e.pol.answerStepWithEnd {
			endCtx := context.WithoutCancel(ctx)
			settle := &pendingSettle{r: held, used: s.used(held.prompt, resp)}
			e.answerSettle = settle
			e.lastStep = func(tx services.Tx) error {
				if _, err := s.appendCallStepIn(endCtx, tx, l, services.StepModelCall, step, capture); err != nil {
					return err
				}
				// Last in the transaction: the day's row stays locked the
				// shortest.
				return s.settleIn(endCtx, tx, settle)
			}
		} else if _, err := s.appendCallStep(ctx, l, services.StepModelCall, step, capture); err != nil {
			return "", u, err
		}
		if len(resp.ToolCalls) == 0 {
			text := resp.Text
			if text == "" && e.pol.noteEmpty {
				text = "(The model returned an empty answer.)"
			}
			return text, u, l.rec.answer(ctx, text)
		}
		if resp.Text != "" {
			partial = resp.Text
		}
		// Large arguments are kept by reference in the records and in the
		// run's next requests; the calls run with the whole arguments.
		recorded := *resp
		recorded.ToolCalls = tools.RecordedCalls(resp.ToolCalls)
		if err := l.rec.assistant(ctx, &recorded); err != nil {
			return "", u, err
		}
		results, bad, err := s.runCalls(ctx, l, resp.ToolCalls, recorded.ToolCalls)
		if err != nil {
			return "", u, &cutError{err: err, partial: partial}
		}
		if held := e.gate.takeHeld(); len(held) > 0 {
			// The run ends this attempt; a run of the same trigger resumes
			// after the owner's decision (approval.go).
			return "", u, &waitError{held: held, taintedBy: e.gate.taintedBy()}
		}
		if badInARow = nextBadCount(badInARow, bad, len(results)); badInARow >= maxBadCallsInARow {
			return "", u, &cutError{err: badCallsError(l, resp.ToolCalls), partial: partial}
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: recorded.ToolCalls})
		req.Messages = append(req.Messages, results...)
		req.Tools = l.withLoaded()
	}
	return "", u, &stepLimitError{Who: e.pol.who, Steps: e.lim.steps, Partial: partial}
}

// origin marks the steps of delegated work with their kind.
func (l loopSpec) origin() services.StepOrigin {
	o := l.e.pol.origin
	o.TaintedBy = l.e.gate.taintedBy()
	return o
}

// stepPayload is a step's stored JSON.
func (s *Service) stepPayload(p any) json.RawMessage { return mustJSON(p) }

// maxBadCallsInARow malformed tool calls in a row (arguments that are not
// a JSON object or fail the schema, unknown tools) end a loop; each one
// before came back to the model as a tool result naming the problem, so it
// could correct itself.
const maxBadCallsInARow = 3

// nextBadCount is the count of malformed calls in a row after a step whose
// n calls held bad malformed ones: a step with one good call resets it.
func nextBadCount(count, bad, n int) int {
	if bad < n {
		return 0
	}
	return count + bad
}

// badCallsError ends a loop whose model kept making malformed calls.
func badCallsError(l loopSpec, calls []services.ToolCall) error {
	last := calls[len(calls)-1]
	what := fmt.Sprintf("the last called %q", last.Name)
	if last.Malformed != "" {
		what += " with arguments that are not a JSON object"
	}
	return services.CodedErrorf(services.EUNAVAILABLE, llm.CodeMalformedToolCall,
		"%s made %d malformed tool calls in a row (%s); each was returned to the model with what was wrong, and it did not correct itself. A larger or better tool-calling model may do better.",
		l.e.pol.who, maxBadCallsInARow, what)
}

// badCall reports whether a tool result says the call itself was malformed.
func badCall(res tools.Result) bool {
	return res.ErrorCode == tools.CodeBadArguments || res.ErrorCode == tools.CodeUnknown
}

// runCalls runs one step's tool calls: in parallel in a main run (delegated
// tasks run side by side), in order in delegated work. Each call and its
// result are recorded together; recorded[i] is what the records keep of
// calls[i]. It also returns how many calls were malformed.
func (s *Service) runCalls(ctx context.Context, l loopSpec, calls, recorded []services.ToolCall) ([]llm.Message, int, error) {
	results := make([]llm.Message, len(calls))
	bad := make([]bool, len(calls))
	errs := make([]error, len(calls))
	if l.e.pol.parallel {
		var wg sync.WaitGroup
		for i, call := range calls {
			wg.Go(func() { results[i], bad[i], errs[i] = s.runCall(ctx, l, call, recorded[i]) })
		}
		wg.Wait()
	} else {
		for i, call := range calls {
			if results[i], bad[i], errs[i] = s.runCall(ctx, l, call, recorded[i]); errs[i] != nil {
				break
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	n := 0
	for _, b := range bad {
		if b {
			n++
		}
	}
	return results, n, nil
}

// runCall executes one call and records it (its arguments as recorded). It
// reports whether the call was malformed (bad arguments, unknown tool).
func (s *Service) runCall(ctx context.Context, l loopSpec, call, recorded services.ToolCall) (llm.Message, bool, error) {
	if _, err := s.opts.Store.AppendStep(ctx, l.stepRun(), services.StepToolCall, s.stepPayload(services.ToolCallStep{
		ID: call.ID, Name: call.Name, Arguments: recorded.Arguments, StepOrigin: l.origin()})); err != nil {
		return llm.Message{}, false, err
	}
	c := l.call
	c.Arguments, c.CallID = call.Arguments, call.ID
	use := services.ToolUse{ID: call.ID, Name: call.Name, Arg: services.ToolArg(call.Arguments), Status: "running"}
	s.publishTool(ctx, l, use)
	started := time.Now()
	var res tools.Result
	var frame *services.Origin
	t, known := s.opts.Tools.Get(call.Name)
	switch {
	case l.box.Deferred(call.Name) && !l.box.Loaded(call.Name):
		// Named exactly without find_tools: loaded now, called next step.
		l.box.Load(call.Name)
		res = tools.LoadedOnCall(call.Name)
	case !known || !offered(l.req.Tools, call.Name) && !l.box.Loaded(call.Name):
		// Only what this loop offered runs: a sub-agent profile or a
		// conversation without a tool cannot call it by guessing its name.
		res = tools.ErrorResult(tools.CodeUnknown, fmt.Sprintf("tool %q is not available here; use one of the tools you were given", call.Name))
	case call.Malformed != "":
		res = tools.ErrorResult(tools.CodeBadArguments, fmt.Sprintf("the arguments of this %s call are not a JSON object: %s. Call it again with its arguments as one JSON object matching its schema.", call.Name, call.Malformed))
	default:
		// Every call the model may make passes the policy (core and
		// loaded tools alike).
		effect, decision, refused := s.gateCall(ctx, l, t, call)
		switch {
		case refused != nil:
			res = *refused
		case decision == services.Ask && l.e.pol.waits:
			// Held: no result now; the run waits for the owner.
			l.e.gate.hold(heldCall{call: call, effect: effect})
			use.Status = "waiting"
			s.publishTool(ctx, l, use)
			return llm.Message{}, false, nil
		case decision == services.Ask:
			res = s.askDetached(ctx, l, call, effect)
		default:
			res = s.opts.Tools.Execute(ctx, call.Name, l.e.gate.stamp(c))
			if call.Name == "fetch_url" {
				l.e.gate.fetched(call.Arguments)
				if !res.IsError {
					l.e.gate.readText(res.Content)
				}
			}
			if o, ok := resultOrigin(t, call.Arguments, res); ok {
				l.e.gate.taint(ctx, o)
				frame = &o
			}
			if lasting(effect) {
				s.auditCall(ctx, services.Approval{RunID: l.stepRun(), TimelineScope: l.call.TimelineScope, Tool: t.Name, Arguments: call.Arguments,
					Effect: effect, TaintedBy: l.e.gate.taintedBy()}, res)
			}
		}
	}
	res.Content = s.opts.Secrets.Mask(chat.CleanAnswer(res.Content))
	use.Status, use.DurationMS = "ok", time.Since(started).Milliseconds()
	if res.IsError {
		use.Status, use.Code = "error", res.ErrorCode
	}
	s.publishTool(ctx, l, use)
	step := s.stepPayload(services.ToolResultStep{
		ID: call.ID, Name: call.Name, IsError: res.IsError, Code: res.ErrorCode, Chars: len(res.Content), StepOrigin: l.origin()})
	// The result's step and its row commit together: one commit, and
	// never one without the other.
	if err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		if _, err := tx.AppendStep(ctx, l.stepRun(), services.StepToolResult, step); err != nil {
			return err
		}
		return l.rec.toolResultTx(ctx, tx, call, res)
	}); err != nil {
		return llm.Message{}, false, err
	}
	msg := llm.Message{Role: llm.RoleTool, Content: res.Content, ToolCallID: call.ID, IsError: res.IsError}
	if frame != nil {
		// Untrusted text is framed as data with its origin for this run's
		// next calls; no guarantee depends on the model heeding it.
		msg.Content = services.UntrustedFrame(*frame, msg.Content)
	}
	if s.opts.PassImages {
		msg.Images = res.Images
	}
	return msg, badCall(res), nil
}

// mainRecorder keeps a main run's tool calls and results as hidden rows of
// the main scope; its answer is posted when the run closes.
type mainRecorder struct {
	s   *Service
	run services.Run
	// calls is set once a row with tool calls is stored (its execution's
	// end then looks for calls left open).
	calls *atomic.Bool
}

func (r mainRecorder) assistant(ctx context.Context, resp *llm.Response) error {
	if len(resp.ToolCalls) > 0 {
		r.calls.Store(true)
	}
	text := chat.CleanAnswer(resp.Text)
	_, _, err := r.s.opts.Store.InsertMessage(ctx, services.NewMessage{
		TimelineScope: r.run.TimelineScope, ContextScope: r.s.mainScope(), Role: services.RoleAssistant,
		Source: services.SourceAgent, Content: text, Visible: false,
		TokenCount: r.s.opts.Tokenizer.Count(text) + 20*len(resp.ToolCalls),
		Metadata:   services.MessageMeta{RunID: r.run.ID, ReplyTo: r.run.TriggerMessageID, ToolCalls: resp.ToolCalls, TaintedBy: taintedRow(ctx)}.Encode(),
	})
	return err
}

func (r mainRecorder) toolResultTx(ctx context.Context, tx services.Tx, call services.ToolCall, res tools.Result) error {
	if res.Stored { // the tool stored its result itself (a handoff)
		return nil
	}
	m, _, err := tx.InsertMessage(ctx, services.NewMessage{
		TimelineScope: r.run.TimelineScope, ContextScope: r.s.mainScope(), Role: services.RoleTool,
		Source: services.SourceAgent, Content: res.Content, Visible: false,
		TokenCount: r.s.opts.Tokenizer.Count(res.Content),
		Metadata:   services.MessageMeta{RunID: r.run.ID, ReplyTo: r.run.TriggerMessageID, ToolCallID: call.ID, ToolName: call.Name, IsError: res.IsError, TaintedBy: taintedRow(ctx)}.Encode(),
	})
	if err == nil && len(res.Images) > 0 {
		err = r.s.saveResultImages(ctx, tx, r.run.TimelineScope, m.ID, call, res)
	}
	return err
}

func (mainRecorder) answer(context.Context, string) error { return nil }

// childRecorder keeps delegated work: a child run stores its messages in its
// own scope (hidden); inline work stores none (the transcript travels in the
// handoff). Both collect the files touched and the transcript.
type childRecorder struct {
	s               *Service
	timeline, scope string
	agentID         string
	childID         int64
	store           bool
	// replyTo is the row the stored rows answer (a fire's input), 0: none.
	replyTo          int64
	refs, transcript []string
}

func (r *childRecorder) record(ctx context.Context, m services.NewMessage) error {
	return r.recordIn(ctx, r.s.opts.Store, m)
}

// recordIn is record in st: the Store, or the Tx of the row's step.
func (r *childRecorder) recordIn(ctx context.Context, st services.Store, m services.NewMessage) error {
	if !r.store {
		return nil
	}
	m.TimelineScope, m.ContextScope, m.AgentID, m.Source, m.Visible = r.timeline, r.scope, r.agentID, services.SourceAgent, false
	if taint := taintedRow(ctx); r.replyTo != 0 || taint != "" {
		// A fire's rows are read back by its schedule's next fires.
		meta, err := services.DecodeMeta(m.Metadata)
		if err != nil {
			return err
		}
		if r.replyTo != 0 {
			meta.ReplyTo = r.replyTo
		}
		meta.TaintedBy = taint
		m.Metadata = meta.Encode()
	}
	_, _, err := st.InsertMessage(ctx, m)
	return err
}

func (r *childRecorder) assistant(ctx context.Context, resp *llm.Response) error {
	return r.record(ctx, services.NewMessage{Role: services.RoleAssistant, Content: chat.CleanAnswer(resp.Text),
		Metadata: services.MessageMeta{RunID: r.childID, ToolCalls: resp.ToolCalls}.Encode()})
}

func (r *childRecorder) toolResultTx(ctx context.Context, tx services.Tx, call services.ToolCall, res tools.Result) error {
	if err := r.recordIn(ctx, tx, services.NewMessage{Role: services.RoleTool, Content: res.Content,
		Metadata: services.MessageMeta{RunID: r.childID, ToolCallID: call.ID, ToolName: call.Name, IsError: res.IsError}.Encode()}); err != nil {
		return err
	}
	if call.Name == "write_file" || call.Name == "read_file" {
		var a struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(call.Arguments, &a) == nil && a.Path != "" && !contains(r.refs, a.Path) {
			r.refs = append(r.refs, a.Path)
		}
	}
	r.transcript = append(r.transcript, fmt.Sprintf("%s(%s) -> %s", call.Name, truncateText(string(call.Arguments), 200), res.Content))
	return nil
}

func (r *childRecorder) answer(ctx context.Context, text string) error {
	if err := r.record(ctx, services.NewMessage{Role: services.RoleAssistant, Content: chat.CleanAnswer(text),
		Metadata: services.MessageMeta{RunID: r.childID}.Encode()}); err != nil {
		return err
	}
	r.transcript = append(r.transcript, "answer: "+text)
	return nil
}

func offered(specs []services.ToolSpec, name string) bool {
	for _, t := range specs {
		if t.Name == name {
			return true
		}
	}
	return false
}

// publishTool tells the owner's clients, live, that a main run's tool call
// started or ended (the chat shows it under the answer being written).
// Sub-agents' calls are not shown: their handoff is.
func (s *Service) publishTool(ctx context.Context, l loopSpec, use services.ToolUse) {
	run := l.stream()
	if run == nil || s.opts.Publisher == nil {
		return
	}
	data, err := json.Marshal(use)
	if err != nil {
		return
	}
	_ = s.opts.Publisher.Publish(ctx, services.Event{Type: services.EventTool, TimelineScope: run.TimelineScope, RunID: run.ID, Data: data})
}
