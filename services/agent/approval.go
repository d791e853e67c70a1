package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/tools"
)

// waitError ends a main run's attempt that holds calls for the owner.
type waitError struct {
	held      []heldCall
	taintedBy string
}

func (e *waitError) Error() string {
	return "waiting for the owner's approval of " + services.Count(len(e.held), "call", "calls")
}

// finishWaiting ends a main run's attempt holding calls: in one
// transaction the run ends 'waiting', each held call becomes a pending
// approval and the owner is asked on their timeline (every channel). The
// timeline's lock is released with it: the owner can go on chatting.
func (e *execution) finishWaiting(ctx context.Context, fin services.RunFinish, w *waitError) error {
	s, run := e.s, e.run
	fin.Status, fin.Error = services.RunWaiting, w.Error()
	var asked []services.Approval
	ask := func(ctx context.Context, tx services.Tx, c *closed) error {
		asked = asked[:0]
		for _, h := range w.held {
			a, err := tx.CreateApproval(ctx, services.Approval{RunID: run.ID, TimelineScope: run.TimelineScope, ContextScope: services.MainScope,
				TriggerMessageID: e.trigger.ID, CallID: h.call.ID, Tool: h.call.Name, Arguments: h.call.Arguments, Effect: h.effect,
				TaintedBy: w.taintedBy, ExpiresAt: time.Now().Add(s.opts.ApprovalTimeout)})
			if err != nil {
				return err
			}
			if err := e.post(s.approvalNotice(a))(ctx, tx, c); err != nil {
				return err
			}
			asked = append(asked, a)
		}
		return nil
	}
	// Its held calls stay open: their results come when it resumes.
	if _, ok, err := e.close(ctx, closing{fin: fin, steps: []closeStep{ask}, keepOpenCalls: true}); err != nil || !ok {
		return err // not ok: stopped meanwhile, nothing is held
	}
	for _, a := range asked {
		s.auditApproval(ctx, a, "asked", "")
	}
	s.publishRun(ctx, run, services.RunWaiting)
	s.log.Info("run waiting for approval", "run_id", run.ID, "approvals", len(asked))
	return nil
}

// approvalNotice asks the owner, on their timeline, to decide a.
func (s *Service) approvalNotice(a services.Approval) services.PostParams {
	args := s.opts.Secrets.Mask(truncateText(string(a.Arguments), 600))
	text := fmt.Sprintf("Approve #%d? %s %s (%s)", a.ID, a.Tool, args, a.Effect)
	if a.TaintedBy != "" {
		text += " — asked " + a.TaintedBy
	}
	text += fmt.Sprintf(". Reply /approve %d or /deny %d (it expires in %s).", a.ID, a.ID, services.ShortDuration(s.opts.ApprovalTimeout.Round(time.Second)))
	return services.PostParams{
		TimelineScope: services.DefaultTimeline, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: text, DedupeKey: fmt.Sprintf("approval:%d:ask", a.ID), NotifyOwner: true,
		Metadata: services.MessageMeta{RunID: a.RunID, ApprovalID: a.ID, Notice: "approval"}.Encode(),
	}
}

// askDetached holds a call of delegated work or a fire, which does not
// wait: the approval is stored and the owner asked; an approved call runs
// on its own and its result is posted to the owner.
func (s *Service) askDetached(ctx context.Context, l loopSpec, call services.ToolCall, effect services.Effect) tools.Result {
	var a services.Approval
	var msg services.Message
	var created bool
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		var err error
		a, err = tx.CreateApproval(ctx, services.Approval{RunID: l.stepRun(), TimelineScope: l.call.TimelineScope, ContextScope: l.call.ContextScope,
			CallID: call.ID, Tool: call.Name, Arguments: call.Arguments, Effect: effect, TaintedBy: l.e.gate.taintedBy(),
			Detached: true, ExpiresAt: time.Now().Add(s.opts.ApprovalTimeout)})
		if err != nil {
			return err
		}
		msg, created, err = s.opts.Chat.PostTx(ctx, tx, s.approvalNotice(a))
		return err
	})
	if err != nil {
		return tools.ErrorResult(tools.CodeInternal, "the approval could not be stored; the call was not run")
	}
	s.opts.Chat.Announce(ctx, msg, created)
	s.auditApproval(ctx, a, "asked", "")
	return tools.ErrorResult(CodeApprovalPending, fmt.Sprintf("%s needs the owner's approval (#%d); it was not run now. If the owner approves, it runs and its result goes to the owner. Carry on without it.", call.Name, a.ID))
}

// DecideApproval approves or denies a pending approval for the owner.
func (s *Service) DecideApproval(ctx context.Context, id int64, approve bool, channel string) (services.Approval, error) {
	to := services.ApprovalDenied
	if approve {
		to = services.ApprovalApproved
	}
	a, err := s.decide(ctx, id, to, channel, commandReply{})
	return s.shown(a), err
}

// ListApprovals lists approvals as the owner is shown them: arguments with
// the service's secrets masked, and the request's text.
func (s *Service) ListApprovals(ctx context.Context, q services.ApprovalQuery) ([]services.Approval, error) {
	as, err := s.opts.Store.ListApprovals(ctx, q)
	for i := range as {
		as[i] = s.shown(as[i])
	}
	return as, err
}

// shown is a as the owner's channels show it: its arguments with secrets
// masked (still JSON: a JSON string of the masked text when masking broke
// it) and the text that asked for it.
func (s *Service) shown(a services.Approval) services.Approval {
	if a.ID == 0 {
		return a
	}
	if m := s.opts.Secrets.Mask(string(a.Arguments)); m != string(a.Arguments) {
		if json.Valid([]byte(m)) {
			a.Arguments = json.RawMessage(m)
		} else {
			a.Arguments, _ = json.Marshal(m)
		}
	}
	a.Request = s.approvalNotice(a).Content
	return a
}

// decide moves a pending approval to its decision in one transaction with
// what follows: once the run's last held call is decided, the run that
// resumes it is queued; the owner's timeline says what was decided. Of two
// decisions at once exactly one wins; the other gets ECONFLICT.
//
// command is the chat command that decided it (/approve N, /deny N; zero
// for a button or a timeout): the notice is then that command's reply, so
// the decision is written once.
func (s *Service) decide(ctx context.Context, id int64, to services.ApprovalState, by string, command commandReply) (services.Approval, error) {
	var a services.Approval
	var msg services.Message
	var created bool
	var resume *services.Run
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		var err error
		if a, err = tx.TransitionApproval(ctx, id, services.ApprovalPending, to, by, ""); err != nil {
			return err
		}
		if !a.Detached {
			if resume, err = s.resumeTx(ctx, tx, a); err != nil {
				return err
			}
		}
		msg, created, err = s.opts.Chat.PostTx(ctx, tx, decidedNotice(a, command))
		return err
	})
	if err != nil {
		return a, err
	}
	s.opts.Chat.Announce(ctx, msg, created)
	s.auditApproval(ctx, a, string(to), by)
	if resume != nil {
		s.publishRun(ctx, *resume, services.RunQueued)
	}
	if a.Detached && to == services.ApprovalApproved {
		go s.executeDetached(context.WithoutCancel(ctx), a)
	}
	return a, nil
}

// commandReply is the chat command a decision answers: its message and
// name (zero: no command).
type commandReply struct {
	message int64
	name    string
}

// decidedNotice tells the owner, on their timeline (every channel), how a
// was decided: the page and Telegram update the request with it. When a
// chat command decided it, the notice is also that command's reply.
func decidedNotice(a services.Approval, command commandReply) services.PostParams {
	meta := services.MessageMeta{RunID: a.RunID, ApprovalID: a.ID, Notice: "approval_decided"}
	p := services.PostParams{
		TimelineScope: services.DefaultTimeline, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: decisionText(a), DedupeKey: fmt.Sprintf("approval:%d:decided", a.ID), NotifyOwner: true,
	}
	if command.message != 0 {
		p.ReplyTo, meta.ReplyTo, meta.Command = command.message, command.message, command.name
	}
	p.Metadata = meta.Encode()
	return p
}

func decisionText(a services.Approval) string {
	how := map[services.ApprovalState]string{services.ApprovalApproved: "approved", services.ApprovalDenied: "denied",
		services.ApprovalTimedOut: "timed out (nobody decided in time)", services.ApprovalCancelled: "cancelled (/stop)"}[a.State]
	text := fmt.Sprintf("#%d %s: %s", a.ID, how, a.Tool)
	if a.DecidedBy != "" && a.State != services.ApprovalTimedOut && a.State != services.ApprovalCancelled {
		text += " (via " + a.DecidedBy + ")"
	}
	return text + "."
}

// resumeTx queues, once the run's last pending approval is decided, the run
// that resumes it: same timeline and trigger, its taint kept.
func (s *Service) resumeTx(ctx context.Context, tx services.Tx, a services.Approval) (*services.Run, error) {
	pending, err := tx.ListApprovals(ctx, services.ApprovalQuery{RunID: a.RunID, State: services.ApprovalPending})
	if err != nil || len(pending) > 0 {
		return nil, err
	}
	waiting, err := tx.GetRun(ctx, a.RunID)
	if err != nil {
		return nil, err
	}
	run, err := tx.CreateRun(ctx, services.NewRun{TimelineScope: waiting.TimelineScope, ContextScope: s.mainScope(),
		TriggerMessageID: waiting.TriggerMessageID, Source: waiting.Source, Status: services.RunQueued,
		Model: s.opts.LLM.Model(), TaintedBy: waiting.TaintedBy, ResumesRunID: waiting.ID})
	if err != nil {
		return nil, err
	}
	if err := tx.SetApprovalResume(ctx, a.RunID, run.ID); err != nil {
		return nil, err
	}
	if err := s.opts.Queue.EnqueueRunTx(ctx, tx, run); err != nil {
		return nil, err
	}
	return &run, nil
}

// settleApprovals gives each call a resumed run held its result before the
// model is called again: an approved call is marked executing (committed)
// and run once; a call found executing (the process died mid-call) is
// never run again: the model is told so; a denied, timed-out or cancelled
// one gets a result saying so. interrupted (the run's worker died) runs
// nothing.
func (s *Service) settleApprovals(ctx context.Context, run services.Run, g *gate, interrupted bool) error {
	if run.ResumesRunID == 0 {
		// Only a resuming run is named by approvals (resumeTx creates it
		// and points them at it): nothing to read.
		return nil
	}
	ctx = withGate(ctx, g)
	as, err := s.opts.Store.ListApprovals(ctx, services.ApprovalQuery{ResumeRunID: run.ID})
	if err != nil {
		return err
	}
	for _, a := range as {
		if err := s.settle(ctx, run, g, a, interrupted); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) settle(ctx context.Context, run services.Run, g *gate, a services.Approval, interrupted bool) error {
	var content string
	next := a.State
	switch a.State {
	case services.ApprovalExecuted, services.ApprovalInterrupted:
		return nil
	case services.ApprovalDenied:
		content = "The owner denied this call (approval #%d); it was not run. Carry on without it."
	case services.ApprovalTimedOut:
		content = "Nobody approved this call in time (approval #%d timed out); it was not run. Carry on without it."
	case services.ApprovalCancelled:
		content = "The owner stopped the run while this call waited (approval #%d); it was not run."
	case services.ApprovalExecuting:
		content, next = "This approved call (#%d) was interrupted by a server restart while it ran; its effect is unknown and it was not run again.", services.ApprovalInterrupted
	case services.ApprovalApproved:
		if interrupted {
			content, next = "The server restarted before this approved call (#%d) ran; it was not run.", services.ApprovalInterrupted
			break
		}
		return s.executeApproved(ctx, run, g, a)
	}
	res := tools.ErrorResult("APPROVAL_"+strings.ToUpper(string(a.State)), fmt.Sprintf(content, a.ID))
	// A call found executing was listed by the run that began it.
	withCall := a.State != services.ApprovalExecuting
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		if next != a.State {
			if _, err := tx.TransitionApproval(ctx, a.ID, a.State, next, "", "interrupted"); err != nil {
				return err
			}
		}
		return s.storeApprovalResult(ctx, tx, run, a, res, withCall)
	})
	if err == nil && withCall && run.ID != a.RunID {
		s.publishUse(ctx, run, services.ToolUse{ID: a.CallID, Name: a.Tool, Arg: services.ToolArg(a.Arguments), Status: "error", Code: res.ErrorCode})
	}
	return err
}

// publishUse tells the owner's clients, live, of a call a resumed run
// settled (the tool activity under its answer).
func (s *Service) publishUse(ctx context.Context, run services.Run, use services.ToolUse) {
	if s.opts.Publisher == nil {
		return
	}
	if data, err := json.Marshal(use); err == nil {
		_ = s.opts.Publisher.Publish(ctx, services.Event{Type: services.EventTool, TimelineScope: run.TimelineScope, RunID: run.ID, Data: data})
	}
}

// executeApproved runs an approved call exactly once: marked executing in
// a committed transition first, its result and the end mark committed
// together after.
func (s *Service) executeApproved(ctx context.Context, run services.Run, g *gate, a services.Approval) error {
	if _, err := s.opts.Store.TransitionApproval(ctx, a.ID, services.ApprovalApproved, services.ApprovalExecuting, "", ""); err != nil {
		if services.IsKind(err, services.ECONFLICT) {
			cur, gerr := s.opts.Store.GetApproval(ctx, a.ID)
			if gerr != nil {
				return gerr
			}
			return s.settle(ctx, run, g, cur, true)
		}
		return err
	}
	// The resumed run lists the call it executes (its tool activity on the
	// page and the debug page), as the run that held it listed it waiting.
	use := services.ToolUse{ID: a.CallID, Name: a.Tool, Arg: services.ToolArg(a.Arguments), Status: "running"}
	if _, err := s.opts.Store.AppendStep(ctx, run.ID, services.StepToolCall, s.stepPayload(services.ToolCallStep{
		ID: a.CallID, Name: a.Tool, Arguments: a.Arguments, StepOrigin: services.StepOrigin{TaintedBy: a.TaintedBy}})); err != nil {
		return err
	}
	s.publishUse(ctx, run, use)
	started := time.Now()
	res := s.opts.Tools.Execute(withGate(ctx, g), a.Tool, g.stamp(tools.Call{TimelineScope: run.TimelineScope, ContextScope: services.MainScope,
		RunID: run.ID, Arguments: a.Arguments, CallID: a.CallID}))
	res.Content = s.opts.Secrets.Mask(chat.CleanAnswer(res.Content))
	if t, ok := s.opts.Tools.Get(a.Tool); ok {
		if a.Tool == "fetch_url" {
			g.fetched(a.Arguments)
			if !res.IsError {
				g.readText(res.Content)
			}
		}
		if o, ok := resultOrigin(t, a.Arguments, res); ok {
			g.taint(ctx, o)
		}
	}
	ac := a
	ac.RunID, ac.TimelineScope = run.ID, run.TimelineScope
	s.auditCall(ctx, ac, res)
	status := "ok"
	if res.IsError {
		status = "error: " + res.ErrorCode
	}
	err := s.opts.Store.Transact(context.WithoutCancel(ctx), func(tx services.Tx) error {
		if _, err := tx.TransitionApproval(ctx, a.ID, services.ApprovalExecuting, services.ApprovalExecuted, "", status); err != nil {
			return err
		}
		return s.storeApprovalResult(ctx, tx, run, a, res, false)
	})
	if err == nil {
		use.Status, use.DurationMS = "ok", time.Since(started).Milliseconds()
		if res.IsError {
			use.Status, use.Code = "error", res.ErrorCode
		}
		s.publishUse(ctx, run, use)
	}
	return err
}

// storeApprovalResult stores a held call's result in the waiting turn
// (once: keyed by the approval) with its step on the resuming run; withCall
// also records the call's step there, first, when run is not the run that
// held it (which recorded it): the resumed run's tool activity lists it.
func (s *Service) storeApprovalResult(ctx context.Context, tx services.Tx, run services.Run, a services.Approval, res tools.Result, withCall bool) error {
	if g := gateOf(ctx); g != nil {
		g.mu.Lock()
		g.calls = append(g.calls, services.ToolCall{ID: a.CallID, Name: a.Tool, Arguments: a.Arguments})
		g.settled = append(g.settled, llm.Message{Role: llm.RoleTool, Content: res.Content, ToolCallID: a.CallID, IsError: res.IsError})
		g.mu.Unlock()
	}
	if withCall && run.ID != a.RunID {
		if _, err := tx.AppendStep(ctx, run.ID, services.StepToolCall, s.stepPayload(services.ToolCallStep{
			ID: a.CallID, Name: a.Tool, Arguments: a.Arguments, StepOrigin: services.StepOrigin{TaintedBy: a.TaintedBy}})); err != nil {
			return err
		}
	}
	if _, err := tx.AppendStep(ctx, run.ID, services.StepToolResult, s.stepPayload(services.ToolResultStep{
		ID: a.CallID, Name: a.Tool, IsError: res.IsError, Code: res.ErrorCode, Chars: len(res.Content),
		StepOrigin: services.StepOrigin{TaintedBy: a.TaintedBy}})); err != nil {
		return err
	}
	taint := taintedRow(ctx)
	if taint == "" {
		taint = a.TaintedBy
	}
	_, _, err := tx.InsertMessage(ctx, services.NewMessage{
		TimelineScope: a.TimelineScope, ContextScope: s.mainScope(), Role: services.RoleTool,
		Source: services.SourceAgent, Content: res.Content, Visible: false, DedupeKey: fmt.Sprintf("approval:%d:result", a.ID),
		TokenCount: s.opts.Tokenizer.Count(res.Content),
		Metadata: services.MessageMeta{RunID: run.ID, ReplyTo: a.TriggerMessageID, ToolCallID: a.CallID, ToolName: a.Tool,
			IsError: res.IsError, ApprovalID: a.ID, TaintedBy: taint}.Encode(),
	})
	return err
}

// executeDetached runs an approved call of delegated work or a fire (whose
// run did not wait) once and posts its result to the owner.
func (s *Service) executeDetached(ctx context.Context, a services.Approval) {
	if _, err := s.opts.Store.TransitionApproval(ctx, a.ID, services.ApprovalApproved, services.ApprovalExecuting, "", ""); err != nil {
		return
	}
	g := s.newGate(services.StarterOwner, 0, a.TaintedBy)
	res := s.opts.Tools.Execute(withGate(ctx, g), a.Tool, g.stamp(tools.Call{TimelineScope: a.TimelineScope, ContextScope: a.ContextScope,
		RunID: a.RunID, Arguments: a.Arguments, CallID: a.CallID}))
	res.Content = s.opts.Secrets.Mask(chat.CleanAnswer(res.Content))
	s.auditCall(ctx, a, res)
	status := "ok"
	if res.IsError {
		status = "error: " + res.ErrorCode
	}
	if _, err := s.opts.Store.TransitionApproval(ctx, a.ID, services.ApprovalExecuting, services.ApprovalExecuted, "", status); err != nil {
		s.log.Error("mark approval executed", "approval_id", a.ID, "err", err)
	}
	_, _, err := s.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: services.DefaultTimeline, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content:   fmt.Sprintf("Approved #%d ran: %s → %s\n\n%s", a.ID, a.Tool, status, truncateText(res.Content, 1500)),
		DedupeKey: fmt.Sprintf("approval:%d:ran", a.ID), NotifyOwner: true,
		Metadata: services.MessageMeta{RunID: a.RunID, ApprovalID: a.ID, Notice: "approval_ran"}.Encode(),
	})
	if err != nil {
		s.log.Error("post approval result", "approval_id", a.ID, "err", err)
	}
}

// cancelApprovals cancels the pending approvals of a timeline's waiting
// runs (/stop): each held call gets its result now, nothing resumes.
func (s *Service) cancelApprovals(ctx context.Context, timeline string) (int, error) {
	pending, err := s.opts.Store.ListApprovals(ctx, services.ApprovalQuery{State: services.ApprovalPending})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range pending {
		if a.TimelineScope != timeline {
			continue
		}
		var msg services.Message
		var created bool
		err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
			cur, err := tx.TransitionApproval(ctx, a.ID, services.ApprovalPending, services.ApprovalCancelled, "stop", "")
			if err != nil {
				return err
			}
			if msg, created, err = s.opts.Chat.PostTx(ctx, tx, decidedNotice(cur, commandReply{})); err != nil || cur.Detached {
				return err
			}
			res := tools.ErrorResult("APPROVAL_CANCELLED", fmt.Sprintf("The owner stopped the run while this call waited (approval #%d); it was not run.", a.ID))
			return s.storeApprovalResult(ctx, tx, services.Run{ID: a.RunID, TimelineScope: a.TimelineScope}, cur, res, false)
		})
		if services.IsKind(err, services.ECONFLICT) {
			continue
		}
		if err != nil {
			return n, err
		}
		s.opts.Chat.Announce(ctx, msg, created)
		a.State = services.ApprovalCancelled
		s.auditApproval(ctx, a, "cancelled", "stop")
		n++
	}
	return n, nil
}

// ExpireApprovals times out the pending approvals past their deadline
// (each at most once, whichever instance gets there first).
func (s *Service) ExpireApprovals(ctx context.Context, now time.Time) (int, error) {
	due, err := s.opts.Store.ListApprovals(ctx, services.ApprovalQuery{ExpiredBy: now})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range due {
		if _, err := s.decide(ctx, a.ID, services.ApprovalTimedOut, "timeout", commandReply{}); err == nil {
			n++
		} else if !services.IsKind(err, services.ECONFLICT) {
			return n, err
		}
	}
	return n, nil
}

// SweepApprovals expires overdue approvals every interval until ctx ends.
func (s *Service) SweepApprovals(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if _, err := s.ExpireApprovals(ctx, now); err != nil && ctx.Err() == nil {
				s.log.Warn("expire approvals", "err", err)
			}
		}
	}
}

// auditCall records a call of a lasting or outbound class and its outcome.
// c is the call as an approval records it (run, timeline, tool, arguments,
// effect, taint).
func (s *Service) auditCall(ctx context.Context, c services.Approval, res tools.Result) {
	status := "ok"
	if res.IsError {
		status = "error"
	}
	s.audit(ctx, services.AuditEntry{Actor: "agent", Action: services.AuditToolCall, Subject: c.Tool, RunID: c.RunID,
		TimelineScope: c.TimelineScope, Status: status, Detail: s.auditDetail(c.Arguments, c.Effect, c.TaintedBy)})
}

// auditApproval records an approval asked or decided.
func (s *Service) auditApproval(ctx context.Context, a services.Approval, status, channel string) {
	actor := "owner"
	if status == "asked" {
		actor = "agent"
	} else if channel == "timeout" {
		actor = "service"
	}
	s.audit(ctx, services.AuditEntry{Actor: actor, Channel: channel, Action: services.AuditApproval,
		Subject: fmt.Sprintf("#%d %s", a.ID, a.Tool), RunID: a.RunID, TimelineScope: a.TimelineScope, Status: status,
		Detail: s.auditDetail(a.Arguments, a.Effect, a.TaintedBy)})
}

// cmdDecide answers /approve N and /deny N (the owner's timeline only).
func (s *Service) cmdDecide(ctx context.Context, msg services.Message, args string, approve bool) (string, error) {
	if msg.TimelineScope != services.DefaultTimeline {
		return "Only the owner decides approvals.", nil
	}
	var id int64
	if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(args), "#"), "%d", &id); err != nil || id <= 0 {
		pending, err := s.opts.Store.ListApprovals(ctx, services.ApprovalQuery{State: services.ApprovalPending, Limit: 20})
		if err != nil {
			return "", err
		}
		if len(pending) == 0 {
			return "Nothing waits for approval.", nil
		}
		var b strings.Builder
		b.WriteString("Waiting for your decision (/approve N or /deny N):")
		for _, a := range pending {
			fmt.Fprintf(&b, "\n#%d %s %s (%s) %s", a.ID, a.Tool, truncateText(s.opts.Secrets.Mask(string(a.Arguments)), 200), a.Effect, a.TaintedBy)
		}
		return b.String(), nil
	}
	to, name := services.ApprovalDenied, "deny"
	if approve {
		to, name = services.ApprovalApproved, "approve"
	}
	_, err := s.decide(ctx, id, to, string(msg.Source), commandReply{message: msg.ID, name: name})
	if services.IsKind(err, services.ECONFLICT) || services.IsKind(err, services.ENOTFOUND) {
		return services.ErrorMessage(err), nil
	}
	// The decision's notice is the command's reply.
	return "", err
}

// cmdPolicy answers /policy: the table in force.
func (s *Service) cmdPolicy() string {
	return "Policy in force (allow, ask = wait for your approval, deny), by who started the run and whether it read untrusted text:\n\n" + s.policy().String()
}

// cmdMemory answers /memory (the remembered items with their origin) and
// /memory forget ID (the item leaves every prompt; its row is kept).
func (s *Service) cmdMemory(ctx context.Context, msg services.Message, args string) (string, error) {
	if s.opts.ContextStore == nil {
		return "Nothing is remembered here.", nil
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	if verb == "forget" {
		var id int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(rest), "#"), "%d", &id); err != nil || id <= 0 {
			return "Usage: /memory forget ID (the ids are listed by /memory).", nil
		}
		if err := s.opts.ContextStore.ForgetMemory(ctx, msg.TimelineScope, id); err != nil {
			return "", err
		}
		s.audit(ctx, services.AuditEntry{Actor: "owner", Channel: string(msg.Source), Action: services.AuditMemoryChange,
			Subject: fmt.Sprintf("memory #%d", id), TimelineScope: msg.TimelineScope, Status: "forgotten"})
		return fmt.Sprintf("Forgotten: memory #%d is no longer sent to the model (its record is kept).", id), nil
	}
	if verb != "" {
		return fmt.Sprintf("Unknown /memory verb %q (want /memory or /memory forget ID).", verb), nil
	}
	items, err := s.opts.ContextStore.ListMemory(ctx, msg.TimelineScope)
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return "Nothing is remembered.", nil
	}
	var b strings.Builder
	b.WriteString("Remembered (sent with every prompt; /memory forget ID removes one):")
	for _, m := range items {
		origin := m.Origin
		if origin == "" {
			origin = "source " + m.Source
		}
		fmt.Fprintf(&b, "\n#%d %s = %s (confidence %.1f; %s", m.ID, m.Key, truncateText(m.Value, 200), m.Confidence, origin)
		if m.RunID != 0 {
			fmt.Fprintf(&b, ", run %d", m.RunID)
		}
		b.WriteString(")")
	}
	return b.String(), nil
}

// withSettled adds to a resumed run's request the calls it settled and
// their results, when its prompt does not read hidden rows (scoped reads
// off): the model sees what became of the calls it held.
func (s *Service) withSettled(req llm.Request, g *gate) llm.Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.settled) == 0 || s.opts.Flags.ScopedRead {
		return req
	}
	msgs := append([]llm.Message(nil), req.Messages...)
	msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: g.calls})
	req.Messages = append(msgs, g.settled...)
	return req
}
