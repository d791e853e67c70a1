package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/tools"
)

// Error codes of calls the service refuses or holds.
const (
	// CodePolicyDenied: the policy denies this call in this run.
	CodePolicyDenied = "POLICY_DENIED"
	// CodeSecretInArguments: an outbound call's arguments hold a secret of
	// the service.
	CodeSecretInArguments = "SECRET_IN_ARGUMENTS"
	// CodeApprovalPending: the call waits for the owner's decision.
	CodeApprovalPending = "APPROVAL_PENDING"
)

// gate is one loop's provenance and policy state: who started it, the
// origin that tainted it (sticky), the hosts it fetched, and the calls it
// holds for approval.
type gate struct {
	s       *Service
	starter services.Starter
	runID   int64

	// group: the run answers a Telegram group, whose members are not all
	// the owner (what it sends there leaves the owner's hands).
	group bool

	mu     sync.Mutex
	origin string
	// roots are the untrusted sources behind the taint ("after reading
	// http://…"), recorded on the rows the loop writes (MessageMeta.
	// TaintedBy): a later prompt that carries them starts tainted.
	roots []string
	hosts map[string]bool
	// given is the owner's words the loop works from (the message a main
	// run answers, a fire's task); read the pages this loop fetched. In a
	// tainted loop a fetch_url reads without egress only when its URL is
	// found verbatim in given, or on a host it fetched in read.
	given, read []string
	held        []heldCall
	// settled are the held calls a resumed run settled, with their results.
	settled []llm.Message
	calls   []services.ToolCall
}

// heldCall is a call a main run holds for the owner's decision.
type heldCall struct {
	call   services.ToolCall
	effect services.Effect
}

type gateKey struct{}

// withGate runs ctx's tool calls under g: gateOf finds it. The tools learn
// the loop's taint from each call (stamp), not from ctx.
func withGate(ctx context.Context, g *gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

func gateOf(ctx context.Context) *gate {
	g, _ := ctx.Value(gateKey{}).(*gate)
	return g
}

func (s *Service) newGate(starter services.Starter, runID int64, origin string) *gate {
	g := &gate{s: s, starter: starter, runID: runID, hosts: map[string]bool{}}
	g.start(origin)
	return g
}

// start marks a loop tainted from its start by origin ("": clean), without
// recording it on the run (the caller does, or the run has it already).
func (g *gate) start(origin string) {
	if origin == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.origin == "" {
		g.origin = origin
	}
	g.addRoot(origin)
}

// maxRoots bounds the sources a row records (the first ones).
const maxRoots = 3

func (g *gate) addRoot(r string) {
	if r == "" || len(g.roots) >= maxRoots {
		return
	}
	for _, x := range g.roots {
		if x == r {
			return
		}
	}
	g.roots = append(g.roots, r)
}

// rootsText is what the rows the loop writes record (MessageMeta.
// TaintedBy): its untrusted sources, "" while clean.
func (g *gate) rootsText() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Join(g.roots, "; ")
}

// taintedRow is the TaintedBy of a row written in ctx's loop.
func taintedRow(ctx context.Context) string { return gateOf(ctx).rootsText() }

// stamp gives a call the loop's taint as it stands when the call runs:
// the origin the owner is shown (c.TaintedBy) and the sources the tool
// records with what it keeps (c.TaintSources). A call's arguments were
// written before it ran, so what the loop reads after does not taint it.
func (g *gate) stamp(c tools.Call) tools.Call {
	if g == nil {
		return c
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c.TaintedBy, c.TaintSources = g.origin, strings.Join(g.roots, "; ")
	return c
}

// taintedBy is the origin that tainted the loop, "" when clean.
func (g *gate) taintedBy() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.origin
}

func (g *gate) key() services.PolicyKey {
	return services.PolicyKey{Starter: g.starter, Tainted: g.taintedBy() != ""}
}

// taint marks the loop tainted by o (the first origin stays) and records it
// on the run.
func (g *gate) taint(ctx context.Context, o services.Origin) {
	if o.Trusted() {
		return
	}
	g.taintWith(ctx, o.String(), o.String())
}

// taintWith marks the loop tainted: origin is what the owner is shown (the
// first stays), roots the sources its rows record (for text read from
// history, the sources that history row records, so they do not nest).
func (g *gate) taintWith(ctx context.Context, origin, roots string) {
	g.mu.Lock()
	first := g.origin == ""
	if first {
		g.origin = origin
	}
	g.addRoot(roots)
	origin = g.origin
	g.mu.Unlock()
	if first && g.runID != 0 {
		if err := g.record(context.WithoutCancel(ctx), origin); err != nil {
			g.s.log.Warn("record run taint", "run_id", g.runID, "err", err)
		}
	}
}

// record stores on the loop's run the origin that tainted it (what the
// owner is shown, and a resumed run starts from). Every run's taint is
// recorded here.
func (g *gate) record(ctx context.Context, origin string) error {
	return g.s.opts.Store.SetRunTaint(ctx, g.runID, origin)
}

func (g *gate) hold(h heldCall) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = append(g.held, h)
}

func (g *gate) takeHeld() []heldCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.held
	g.held = nil
	return h
}

// inGroup reports whether a message came from a Telegram group chat.
func inGroup(m services.Message) bool {
	return m.Meta.ChatType == "group" || m.Meta.ChatType == "supergroup"
}

// mainStarter is who started a main run of timeline.
func mainStarter(timeline string) services.Starter {
	if timeline != services.DefaultTimeline {
		return services.StarterStranger
	}
	return services.StarterOwner
}

// startOrigin is what taints a main run from its start: a stranger's
// words, an attachment or a transcript, or the taint of the run it resumes.
func (s *Service) startOrigin(ctx context.Context, run services.Run, trigger services.Message) string {
	if run.TaintedBy != "" {
		return run.TaintedBy
	}
	if run.TimelineScope != services.DefaultTimeline {
		return services.Origin{Kind: services.OriginStranger, Detail: "the paired stranger " + strings.TrimPrefix(run.TimelineScope, "tg:")}.String()
	}
	meta := trigger.Meta
	if meta.TaintedBy != "" && trigger.Role == services.RoleUser {
		// A user message a channel stored as someone else's words (a
		// forwarded Telegram message).
		return meta.TaintedBy
	}
	if len(meta.Files) == 0 {
		return ""
	}
	files, err := s.opts.Store.AttachmentsOf(ctx, run.TimelineScope, []int64{trigger.ID})
	if err != nil || len(files[trigger.ID]) == 0 {
		return services.Origin{Kind: services.OriginAttachment, Detail: meta.Files[0].Name}.String()
	}
	f := files[trigger.ID][0]
	if f.Kind.Transcribable() {
		return services.Origin{Kind: services.OriginTranscript, Detail: f.DisplayName()}.String()
	}
	return services.Origin{Kind: services.OriginAttachment, Detail: f.DisplayName()}.String()
}

// effectOf classifies one call: the tool's declared class, except that
// fetch_url reads (no egress) from a host this run already fetched without
// a query string or user info (in a tainted run: a URL found verbatim in
// the owner's words the run works from, on any host, or in a page the run
// fetched, on a host it fetched), and send_file on the owner's own timeline sends to the
// owner (workspace) unless the run answers a group.
func (g *gate) effectOf(t tools.Tool, timeline string, args json.RawMessage) services.Effect {
	switch t.Name {
	case "fetch_url":
		var a struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(args, &a) == nil {
			if u, err := url.Parse(a.URL); err == nil && u.RawQuery == "" && !u.ForceQuery && u.Host != "" && u.User == nil {
				g.mu.Lock()
				seen := g.hosts[strings.ToLower(u.Host)]
				if g.origin != "" {
					// Tainted: the path (and fragment) could carry what
					// the run read out to the host; only a URL the owner
					// gave, or a page's own link on a host it fetched,
					// reads.
					seen = found(g.given, a.URL) || seen && found(g.read, a.URL)
				}
				g.mu.Unlock()
				if seen {
					return services.EffectRead
				}
			}
		}
	case "send_file":
		if timeline == services.DefaultTimeline && !g.group {
			return services.EffectWorkspace
		}
	}
	// The context manifest decides what every later prompt includes: a
	// workspace write that names it changes what lasts.
	if t.Effect == services.EffectWorkspace && namesManifest(args) {
		return services.EffectPersist
	}
	return t.Effect
}

// namesManifest reports whether a call's path arguments name the context
// manifest (services.ContextManifestFile), however spelled.
func namesManifest(args json.RawMessage) bool {
	var a map[string]json.RawMessage
	if json.Unmarshal(args, &a) != nil {
		return false
	}
	for _, k := range []string{"path", "from", "to", "src", "dst", "source", "destination", "target"} {
		var v string
		if json.Unmarshal(a[k], &v) != nil || v == "" {
			continue
		}
		clean := strings.TrimLeft(path.Clean("/"+strings.ReplaceAll(v, "\\", "/")), "/")
		if strings.EqualFold(clean, services.ContextManifestFile) {
			return true
		}
	}
	return false
}

// maxReadTexts bounds the texts a loop keeps to look fetch URLs up in.
const maxReadTexts = 64

// give keeps the owner's words the loop works from (the message a main
// run on the owner's timeline answers, a fire's task): a URL found there
// verbatim is the owner's, not composed by the model.
func (g *gate) give(text string) {
	if g == nil || strings.TrimSpace(text) == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.given = append(g.given, text)
}

// readText keeps each page a fetch_url returned (its JSON and, decoded, its
// content, so escaping cannot hide a link): a later fetch of a link found
// there verbatim, on a host the loop fetched, reads.
func (g *gate) readText(text string) {
	if g == nil || strings.TrimSpace(text) == "" {
		return
	}
	texts := []string{text}
	var page struct {
		Content string `json:"content"`
	}
	if strings.HasPrefix(strings.TrimSpace(text), "{") && json.Unmarshal([]byte(text), &page) == nil && page.Content != "" {
		texts = append(texts, page.Content)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range texts {
		if len(g.read) < maxReadTexts {
			g.read = append(g.read, t)
		}
	}
}

// found reports whether u appears verbatim in one of texts.
func found(texts []string, u string) bool {
	for _, t := range texts {
		if strings.Contains(t, u) {
			return true
		}
	}
	return false
}

// fetched records the host of a fetch_url call.
func (g *gate) fetched(args json.RawMessage) {
	var a struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(args, &a) != nil {
		return
	}
	if u, err := url.Parse(a.URL); err == nil && u.Host != "" {
		g.mu.Lock()
		g.hosts[strings.ToLower(u.Host)] = true
		g.mu.Unlock()
	}
}

// resultOrigin is the origin of a tool's result when it is not the
// owner's or the service's text: fetched pages, search results, MCP
// results, recalled archive items, handoffs, attachments read back (by
// their path, or as the tool reports it read one: res.Untrusted).
func resultOrigin(t tools.Tool, args json.RawMessage, res tools.Result) (services.Origin, bool) {
	var a struct {
		URL     string `json:"url"`
		Query   string `json:"query"`
		Path    string `json:"path"`
		AgentID string `json:"agent_id"`
	}
	_ = json.Unmarshal(args, &a)
	switch {
	case t.Source != "":
		return services.Origin{Kind: services.OriginMCP, Detail: t.Source + "/" + t.Name}, true
	case t.Name == "fetch_url":
		return services.Origin{Kind: services.OriginFetch, Detail: a.URL}, true
	case t.Name == "web_search":
		return services.Origin{Kind: services.OriginSearch, Detail: a.Query}, true
	case strings.HasPrefix(t.Name, "recall_"):
		return services.Origin{Kind: services.OriginRecall}, true
	case t.Name == "delegate":
		return services.Origin{Kind: services.OriginHandoff, Detail: a.AgentID}, true
	case strings.HasPrefix(strings.TrimPrefix(a.Path, "./"), "uploads/"):
		return services.Origin{Kind: services.OriginAttachment, Detail: a.Path}, true
	case res.Untrusted != nil:
		return *res.Untrusted, true
	}
	return services.Origin{}, false
}

// outbound reports whether calls of effect send something out of the
// machine (their arguments must not carry a secret).
func outbound(e services.Effect) bool {
	return e == services.EffectEgress || e == services.EffectExternal || e == services.EffectExec || e == services.EffectDestructive
}

// lasting reports whether calls of effect are audited.
func lasting(e services.Effect) bool {
	return e != services.EffectRead && e != services.EffectWorkspace
}

// policy is the policy in force.
func (s *Service) policy() *services.Policy {
	if s.opts.Policy == nil {
		return services.DefaultPolicy()
	}
	return s.opts.Policy
}

// Policy returns the policy in force (services.ApprovalDecider).
func (s *Service) Policy() *services.Policy { return s.policy() }

// gateCall decides one call before it runs: a refusal (a secret in an
// outbound argument, a denied call) as a Result, ask, or allow.
func (s *Service) gateCall(ctx context.Context, l loopSpec, t tools.Tool, call services.ToolCall) (services.Effect, services.Decision, *tools.Result) {
	effect := l.e.gate.effectOf(t, l.call.TimelineScope, call.Arguments)
	// An MCP tool's arguments go to its server (perhaps a remote one) even
	// when the server calls the tool read-only.
	if (outbound(effect) || t.Source != "") && s.opts.Secrets.Contains(string(call.Arguments)) {
		s.audit(ctx, services.AuditEntry{Actor: "agent", Action: services.AuditSecretRefused, Subject: t.Name, RunID: l.stepRun(),
			TimelineScope: l.call.TimelineScope, Status: "refused", Detail: s.auditDetail(call.Arguments, effect, l.e.gate.taintedBy())})
		r := tools.ErrorResult(CodeSecretInArguments, fmt.Sprintf("the arguments of %s contain a secret of the service; the call was refused and recorded", t.Name))
		return effect, services.Deny, &r
	}
	d := s.policy().Decide(l.e.gate.key(), effect, t.Name, t.Source)
	if d == services.Deny {
		why := "the policy denies " + string(effect) + " calls in this conversation"
		if by := l.e.gate.taintedBy(); by != "" {
			why += " (this run read untrusted text " + by + ")"
		}
		r := tools.ErrorResult(CodePolicyDenied, fmt.Sprintf("%s was not run: %s.", t.Name, why))
		s.audit(ctx, services.AuditEntry{Actor: "agent", Action: services.AuditToolCall, Subject: t.Name, RunID: l.stepRun(),
			TimelineScope: l.call.TimelineScope, Status: "denied", Detail: s.auditDetail(call.Arguments, effect, l.e.gate.taintedBy())})
		return effect, d, &r
	}
	return effect, d, nil
}

// auditDetail is an audited call's particulars, secrets masked.
func (s *Service) auditDetail(args json.RawMessage, effect services.Effect, taintedBy string) json.RawMessage {
	masked := s.opts.Secrets.Mask(string(args))
	if !json.Valid([]byte(masked)) {
		masked = string(mustJSON(masked))
	}
	return mustJSON(map[string]any{"arguments": json.RawMessage(masked), "effect": effect, "tainted_by": taintedBy})
}

// audit appends to the audit trail (nil: none kept); a failure is logged.
func (s *Service) audit(ctx context.Context, e services.AuditEntry) {
	if s.opts.Audit == nil {
		return
	}
	if _, err := s.opts.Audit.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("append audit", "action", e.Action, "subject", e.Subject, "err", err)
	}
}

// offerable reports whether a tool is offered at all to a run of starter
// (tainted as given): a tool its class denies there is not offered.
func (s *Service) offerable(t tools.Tool, k services.PolicyKey) bool {
	return s.policy().Decide(k, t.Effect, t.Name, t.Source) != services.Deny
}
