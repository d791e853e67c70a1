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
	"github.com/switchboard/switchboard/services/tools"
)

// Profile is a named sub-agent: its system prompt, the tools it may use and
// an optional model of its own (e.g. a cheaper one).
type Profile struct {
	ID           string   `json:"-"`
	SystemPrompt string   `json:"system"`
	Tools        []string `json:"tools"`
	Model        string   `json:"model"`
	// LLM is the provider for Model (set by the wiring); nil: the main one.
	LLM llm.Provider `json:"-"`
}

// SubAgentLimits bound delegation.
type SubAgentLimits struct {
	// MaxConcurrent children of one run at a time (default 4).
	MaxConcurrent int
	// MaxDepth of the delegation tree: 1 lets main delegate, children not (default 1).
	MaxDepth int
	// Timeout of one child run (default 3 minutes).
	Timeout time.Duration
	// MaxSteps of one child run (default 8).
	MaxSteps int
}

func (l *SubAgentLimits) defaults() {
	if l.MaxConcurrent <= 0 {
		l.MaxConcurrent = 4
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 1
	}
	if l.Timeout <= 0 {
		l.Timeout = 3 * time.Minute
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = 8
	}
}

// DefaultSubAgentPrompt is the system prompt of a child without a profile.
const DefaultSubAgentPrompt = `You are a sub-agent working on one task for the main agent. You see only the task payload, not the conversation. Do the task with your tools, then answer with the result: start with a one-line summary, then the details the main agent needs. Follow every constraint in the payload.`

// TaskPayload is what a child receives (seed 000's context payload): the
// task, constraints inherited from the owner's rules, relevant earlier
// handoffs, the budget and, when it had to shrink, the downgrade chain.
type TaskPayload struct {
	Version      int           `json:"version"`
	Task         string        `json:"task"`
	AgentID      string        `json:"agent_id,omitempty"`
	Constraints  []string      `json:"constraints"`
	Observations []string      `json:"observations,omitempty"`
	Budget       PayloadBudget `json:"budget"`
	Downgrade    []string      `json:"downgrade,omitempty"`
	Parent       PayloadParent `json:"parent"`
}

// PayloadParent is the run that delegated the task.
type PayloadParent struct {
	RunID    int64  `json:"run_id"`
	Timeline string `json:"timeline"`
}

// PayloadBudget is the child's token budget.
type PayloadBudget struct {
	PromptTokens int `json:"prompt_tokens"`
	MaxSteps     int `json:"max_steps"`
	TimeoutSec   int `json:"timeout_seconds"`
}

// Handoff is the structured result a child returns to its parent's scope.
// Its status comes from the runtime, not from the model's text.
type Handoff struct {
	Version    int                `json:"version"`
	Kind       string             `json:"kind"`
	RunID      int64              `json:"run_id,omitempty"`
	AgentID    string             `json:"agent_id"`
	Mode       string             `json:"mode"` // "subagent" or "inline"
	Status     services.RunStatus `json:"status"`
	Summary    string             `json:"summary"`
	Result     string             `json:"result,omitempty"`
	References []string           `json:"references,omitempty"`
	Usage      struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		CachedTokens     int `json:"cached_tokens"`
	} `json:"usage"`
	DurationMS int64 `json:"duration_ms"`
	// Transcript is the whole execution, only for inline runs (single-space
	// execution puts everything in main).
	Transcript []string `json:"transcript,omitempty"`
}

type delegateArgs struct {
	Task        string   `json:"task" jsonschema:"The task, self-contained: the sub-agent sees nothing else of the conversation."`
	AgentID     string   `json:"agent_id,omitempty" jsonschema:"A named sub-agent profile, if one fits; empty for a general one."`
	Constraints []string `json:"constraints,omitempty" jsonschema:"Extra constraints for this task."`
}

// registerDelegate adds the delegate tool. Several delegate calls in one
// step run in parallel (up to MaxConcurrent).
func (s *Service) registerDelegate(reg *tools.Registry) error {
	desc := "Hand a self-contained task to a sub-agent that works in its own workspace scope and returns a structured result (handoff). Call it several times in one step to run tasks in parallel."
	if len(s.opts.Profiles) > 0 {
		var names []string
		for id := range s.opts.Profiles {
			names = append(names, id)
		}
		desc += " Profiles: " + strings.Join(names, ", ") + "."
	}
	return reg.Register(tools.Func("delegate", desc, s.handleDelegate).
		WithHistory(tools.HistoryRule{MaxChars: 1500, DropFields: []string{"transcript"}}))
}

// inline reports whether delegated tasks run in main ("main agent
// single-space execution"): sub-agents off, or the scoped read path off.
func (s *Service) inline() bool {
	return !s.opts.Flags.SubAgentsOn()
}

func (s *Service) handleDelegate(ctx context.Context, call tools.Call, args delegateArgs) (tools.Result, error) {
	if strings.TrimSpace(args.Task) == "" {
		return tools.ErrorResult(tools.CodeBadArguments, "task is empty"), nil
	}
	profile := Profile{SystemPrompt: DefaultSubAgentPrompt}
	if args.AgentID != "" {
		p, ok := s.opts.Profiles[args.AgentID]
		if !ok {
			return tools.ErrorResult(tools.CodeBadArguments, fmt.Sprintf("unknown agent_id %q", args.AgentID)), nil
		}
		profile = p
		profile.ID = args.AgentID
	}
	if call.Depth >= s.opts.SubAgents.MaxDepth {
		return tools.ErrorResult("SUBAGENT_DEPTH", fmt.Sprintf("delegation is limited to depth %d; do this task yourself", s.opts.SubAgents.MaxDepth)), nil
	}
	parent, err := s.opts.Store.GetRun(ctx, call.RunID)
	if err != nil {
		return tools.Result{}, err
	}
	release, err := s.acquireChildSlot(ctx, parent.ID)
	if err != nil {
		return tools.Result{}, err
	}
	defer release()
	return s.runChild(ctx, parent, profile, args.Task, args.Constraints, call)
}

// acquireChildSlot bounds a run's concurrent children.
func (s *Service) acquireChildSlot(ctx context.Context, parentID int64) (func(), error) {
	s.mu.Lock()
	sem, ok := s.childSlots[parentID]
	if !ok {
		sem = make(chan struct{}, s.opts.SubAgents.MaxConcurrent)
		s.childSlots[parentID] = sem
	}
	s.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runChild executes a delegated task: in its own child run and scope, or
// inline in main when sub-agents are off. The result is a handoff.
func (s *Service) runChild(ctx context.Context, parent services.Run, profile Profile, task string, extra []string, call tools.Call) (tools.Result, error) {
	started := time.Now()
	inline := s.inline()
	provider := s.opts.LLM
	if profile.LLM != nil {
		provider = profile.LLM
	}
	payload, err := s.taskPayload(ctx, parent, profile, task, extra, provider.ContextWindow())
	if err != nil {
		return tools.Result{}, err
	}
	payloadJSON := mustJSON(payload)
	h := Handoff{Version: 1, Kind: "handoff", AgentID: agentName(profile), Mode: "subagent"}
	var child services.Run
	scope := ""
	if inline {
		h.Mode = "inline"
	} else {
		child, err = s.opts.Store.CreateRun(ctx, services.NewRun{
			TimelineScope: parent.TimelineScope, ParentRunID: parent.ID, AgentID: profile.ID,
			TriggerMessageID: parent.TriggerMessageID, Source: services.SourceAgent, Status: services.RunRunning, Model: provider.Model(),
		})
		if err != nil {
			return tools.Result{}, err
		}
		scope = fmt.Sprintf("run:%d", child.ID)
		if profile.ID != "" {
			scope = fmt.Sprintf("sub:%s:%d", profile.ID, child.ID)
		}
		// From here on the child run exists: its bookkeeping must not be cut
		// short by a /stop (the loop below sees the cancellation and the
		// child ends 'cancelled' with its handoff), and a failure must not
		// leave it 'running'.
		bctx := context.WithoutCancel(ctx)
		err := s.opts.Store.SetRunContextScope(bctx, child.ID, scope)
		if err == nil {
			_, err = s.opts.Store.AppendStep(bctx, child.ID, "task_payload", payloadJSON)
		}
		if err != nil {
			_, _ = s.opts.Store.FinishRun(bctx, child.ID, services.RunFinish{Status: services.RunError, Error: "could not record the task: " + err.Error()})
			return tools.Result{}, err
		}
		child.ContextScope = scope
		h.RunID = child.ID
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.SubAgents.Timeout)
	defer cancel()
	text, refs, u, transcript, runErr := s.childLoop(cctx, parent, child, scope, profile, provider, payloadJSON, call.Depth+1, inline)
	h.Usage.PromptTokens, h.Usage.CompletionTokens, h.Usage.CachedTokens = u.prompt, u.completion, u.cached
	h.DurationMS = time.Since(started).Milliseconds()
	h.References = refs
	switch {
	case runErr == nil:
		h.Status = services.RunOK
		h.Result = truncateText(text, 8000)
		h.Summary = firstLine(text)
	case errors.Is(runErr, context.DeadlineExceeded) && ctx.Err() == nil:
		h.Status = services.RunTimeout
		h.Summary = fmt.Sprintf("the sub-agent did not finish within %s", s.opts.SubAgents.Timeout)
	case ctx.Err() != nil:
		h.Status = services.RunCancelled
		h.Summary = "cancelled with its parent"
	default:
		h.Status = services.RunError
		h.Summary = services.ErrorMessage(runErr)
		var limit *stepLimitError
		if errors.As(runErr, &limit) {
			// Say what happened, with what it had got to, so the parent
			// can go on or split the task.
			h.Summary = limit.Error()
			h.Result = truncateText(limit.Partial, 8000)
		}
	}
	if inline {
		h.Transcript = transcript
		if _, err := s.opts.Store.AppendStep(context.WithoutCancel(ctx), parent.ID, services.StepHandoff, mustJSON(h)); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Content: string(mustJSON(h)), IsError: h.Status != services.RunOK}, nil
	}
	if err := s.deliverHandoff(context.WithoutCancel(ctx), parent, child, h, u, call); err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Content: string(mustJSON(h)), IsError: h.Status != services.RunOK, Stored: true}, nil
}

// deliverHandoff closes the child run and writes its handoff into main (as
// the delegate call's result, a handoff step of the parent, and a visible
// marker) in one transaction: exactly once, also across a crash.
func (s *Service) deliverHandoff(ctx context.Context, parent, child services.Run, h Handoff, u usage, call tools.Call) error {
	body := mustJSON(h)
	marker := services.PostParams{
		TimelineScope: parent.TimelineScope, Source: services.SourceAgent, Role: services.RoleAssistant, AgentID: h.AgentID,
		Content:   fmt.Sprintf("%s finished (%s): %s", h.AgentID, h.Status, h.Summary),
		DedupeKey: fmt.Sprintf("handoff-marker:%d", child.ID),
		Metadata:  services.MessageMeta{Kind: services.MetaHandoff, RunID: parent.ID, ChildRunID: child.ID, AgentID: h.AgentID, HandoffStatus: h.Status, ReplyTo: parent.TriggerMessageID}.Encode(),
	}
	var msg services.Message
	var created bool
	err := s.opts.Store.Transact(ctx, func(tx services.Store) error {
		if _, err := tx.FinishRun(ctx, child.ID, services.RunFinish{Status: h.Status, Error: errorText(h),
			PromptTokens: u.prompt, CompletionTokens: u.completion, CachedTokens: u.cached}); err != nil {
			return err
		}
		if _, _, err := tx.InsertMessage(ctx, services.NewMessage{
			TimelineScope: parent.TimelineScope, ContextScope: s.mainScope(), Role: services.RoleTool, Source: services.SourceAgent,
			Content: string(body), Visible: false, DedupeKey: fmt.Sprintf("handoff:%d", child.ID),
			TokenCount: s.opts.Tokenizer.Count(string(body)),
			Metadata:   services.MessageMeta{RunID: parent.ID, ReplyTo: parent.TriggerMessageID, ToolCallID: call.CallID, ToolName: "delegate", Kind: services.MetaHandoff, ChildRunID: child.ID, IsError: h.Status != services.RunOK}.Encode(),
		}); err != nil {
			return err
		}
		if _, err := tx.AppendStep(ctx, parent.ID, services.StepHandoff, body); err != nil {
			return err
		}
		var err error
		msg, created, err = s.opts.Chat.PostTx(ctx, tx, marker)
		return err
	})
	if err != nil {
		return err
	}
	s.opts.Chat.Announce(ctx, msg, created)
	if done, err := s.opts.Store.GetRun(ctx, child.ID); err == nil {
		trigger := services.Message{ID: parent.TriggerMessageID, TimelineScope: parent.TimelineScope}
		for _, o := range s.opts.Observers {
			o.RunFinished(ctx, done, trigger)
		}
	}
	return nil
}

func errorText(h Handoff) string {
	if h.Status == services.RunOK {
		return ""
	}
	return h.Summary
}

func agentName(p Profile) string {
	if p.ID == "" {
		return "sub-agent"
	}
	return p.ID
}

// taskPayload builds the child's payload within half the child's window,
// shrinking it along a recorded downgrade chain when needed.
func (s *Service) taskPayload(ctx context.Context, parent services.Run, profile Profile, task string, extra []string, window int) (TaskPayload, error) {
	p := TaskPayload{Version: 1, Task: task, AgentID: profile.ID, Parent: PayloadParent{RunID: parent.ID, Timeline: parent.TimelineScope}}
	// Hard constraints of the owner must reach the child.
	if s.opts.ContextStore != nil {
		cs, err := s.opts.ContextStore.ListConstraints(ctx, parent.TimelineScope)
		if err != nil {
			return p, err
		}
		for _, c := range cs {
			if c.Hard {
				p.Constraints = append(p.Constraints, c.Text)
			}
		}
	}
	for _, c := range extra {
		if strings.TrimSpace(c) != "" {
			p.Constraints = append(p.Constraints, c)
		}
	}
	// Relevant observations: the latest finished sibling handoffs.
	kids, err := s.opts.Store.ListRuns(ctx, services.RunQuery{TimelineScope: parent.TimelineScope, Limit: 50})
	if err != nil {
		return p, err
	}
	for _, k := range kids {
		if k.ParentRunID != 0 && k.FinishedAt != nil && len(p.Observations) < 3 {
			p.Observations = append(p.Observations, fmt.Sprintf("run %d (%s, %s)", k.ID, k.AgentID, k.Status))
		}
	}
	budget := window / 2
	p.Budget = PayloadBudget{PromptTokens: budget, MaxSteps: s.opts.SubAgents.MaxSteps, TimeoutSec: int(s.opts.SubAgents.Timeout.Seconds())}
	size := func() int { return s.opts.Tokenizer.Count(string(mustJSON(p))) }
	if size() > budget && len(p.Observations) > 0 {
		p.Observations = nil
		p.Downgrade = append(p.Downgrade, "dropped observations")
	}
	if size() > budget {
		p.Task = truncateText(p.Task, budget*2)
		p.Downgrade = append(p.Downgrade, "cut the task text to the budget")
	}
	return p, nil
}

// childLoop runs a delegated task's model/tool loop. In a child run its
// messages are stored in the child's scope (visible = 0) and its steps as the
// child's; inline, its steps are the parent's, nothing else is stored and the
// transcript travels in the handoff.
func (s *Service) childLoop(ctx context.Context, parent, child services.Run, scope string, profile Profile, provider llm.Provider,
	payload json.RawMessage, depth int, inline bool) (string, []string, usage, []string, error) {
	system := profile.SystemPrompt
	if system == "" {
		system = DefaultSubAgentPrompt
	}
	var defs []services.ToolSpec
	for _, t := range s.toolDefs(parent.TimelineScope) {
		if t.Name == "delegate" && depth >= s.opts.SubAgents.MaxDepth {
			continue
		}
		if len(profile.Tools) > 0 && !profileAllows(profile.Tools, t.Name) {
			continue
		}
		defs = append(defs, t)
	}
	l := loopSpec{kind: kindChild, provider: provider, maxSteps: s.opts.SubAgents.MaxSteps, stepRun: child.ID, who: "the sub-agent",
		req: llm.Request{System: system, CacheSystem: true, Tools: defs,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: "Task payload (JSON):\n" + string(payload)}}},
		call: tools.Call{TimelineScope: parent.TimelineScope, ContextScope: scopeOr(scope), RunID: child.ID, Depth: depth}}
	rec := &childRecorder{s: s, timeline: parent.TimelineScope, scope: scope, agentID: profile.ID, childID: child.ID, store: !inline,
		transcript: []string{"task: " + truncateText(string(payload), 400)}}
	if inline {
		l.kind, l.stepRun, l.call.RunID = kindInline, parent.ID, parent.ID
	}
	l.rec = rec
	if err := rec.record(ctx, services.NewMessage{Role: services.RoleUser, Content: l.req.Messages[0].Content,
		Metadata: services.MessageMeta{RunID: child.ID, Kind: services.MetaTaskPayload}.Encode()}); err != nil {
		return "", nil, usage{}, nil, err
	}
	text, u, err := s.toolLoop(ctx, l)
	return text, rec.refs, u, rec.transcript, err
}

func scopeOr(scope string) string {
	if scope == "" {
		return services.MainScope
	}
	return scope
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return truncateText(s, 300)
}

func truncateText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// profileAllows reports whether a profile's tool list names tool: by name,
// or a whole MCP server as "<server>__*".
func profileAllows(list []string, tool string) bool {
	for _, p := range list {
		if p == tool || strings.HasSuffix(p, "__*") && strings.HasPrefix(tool, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}
