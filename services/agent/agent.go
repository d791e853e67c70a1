// Package agent is the agent runtime: it turns each user message into a run
// (agent_runs), executes runs with the model and tools step by step, records
// every step, posts the final answer to the timeline, and answers the chat
// commands.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/tools"
)

// Config are the runtime's settings: what the environment sets
// (cmd/switchboard's env table), nothing built.
type Config struct {
	Flags services.Flags
	// MaxSteps bounds model calls per run; RunTimeout bounds a run.
	MaxSteps   int
	RunTimeout time.Duration
	// LogContent allows message text in logs.
	LogContent bool
	// PassImages sends the images tools return to the model with their
	// results (the model must read images: LLM_IMAGES=1).
	PassImages bool
	// Profiles are the named sub-agents (a profile with a model of its own
	// is given its provider by the app); SubAgents bounds delegation.
	Profiles  map[string]Profile
	SubAgents SubAgentLimits
	// Fire bounds one schedule fire.
	Fire FireLimits
	// RequestRetention is how long each model call's exact request is kept
	// in the Store, with its step (AGENT_REQUEST_RETENTION; 0: none kept).
	RequestRetention time.Duration
	// ToolsCore names the tools every run has loaded (TOOLS_CORE; names
	// or "<server>__*"); nil: tools.DefaultCore, and for main runs with
	// sub-agents on tools.CoordinatorCore (mainCore). ToolsDeferOver
	// (TOOLS_DEFER_OVER, tokens): when the definitions of every tool a run
	// may use are more, the others are deferred behind find_tools; 0:
	// nothing is ever deferred.
	ToolsCore      []string
	ToolsDeferOver int
	// Policy decides allow, ask or deny per call (nil: the default);
	// ApprovalTimeout is how long a held call waits for the owner (default
	// 30 minutes). Secrets are the service's own secrets: never in a
	// prompt, refused in an outbound tool argument.
	Policy          *services.Policy
	ApprovalTimeout time.Duration
	Secrets         *services.Secrets
}

// Deps are the runtime's collaborators: the ones every run uses, then its
// optional capabilities in four groups (their fields are the runtime's
// own, as s.opts.Recall). An optional one given turns the feature it backs
// on; nil, it is off and says so.
type Deps struct {
	// Store, Chat and LLM are required.
	Store services.Store
	// Chat posts the runtime's answers and notices, and /retry's question
	// (whose turn is this runtime's: it is the ChatService's turn handler).
	Chat *chat.Service
	LLM  llm.Provider
	// ProfileLLMs are the providers of the sub-agent profiles with a model
	// of their own (Config.Profiles), by profile id; the others use LLM.
	ProfileLLMs map[string]llm.Provider
	// Queue inserts a run's job in the transaction that stores the run
	// (built before the queue's workers, which call back into the runtime).
	Queue services.RunQueue
	// Compactions schedules compactions as jobs of their own, after the
	// run's lock is released (nil: they run inline after the answer).
	Compactions services.CompactionQueue
	Context     *prompt.Manager
	// Tools are the tools runs may call (the app registers them:
	// app/tools.go).
	Tools     *tools.Registry
	Publisher services.Publisher
	// TxEvents sends a run's events with the transaction that commits
	// what they announce (the claim's running status, the end's status),
	// so the other instances hear them with the commit; nil: they are
	// published after it.
	TxEvents  services.TxPublisher
	Observers []services.RunObserver
	Logger    *slog.Logger

	Memory
	Files
	Plans
	Oversight
}

// Memory is what a run's context holds beyond the timeline.
type Memory struct {
	// ContextStore holds rules, remembered settings and summary segments.
	ContextStore services.ContextStore
	// Manifests hold each timeline's context manifest (/pin, /unpin,
	// /pins; nil: the commands say it is not configured).
	Manifests services.ContextManifests
	// Recall is the archive a sub-agent's observations are recalled from
	// (nil: none; the recall tools are given it by the app). Proposals
	// keep the agent's rule proposals for /rules (nil: /rules approve says
	// they are not available).
	Recall    services.RecallStore
	Proposals services.RuleProposals
	// Tokenizer counts what was not counted when stored (nil: an estimate).
	Tokenizer prompt.Tokenizer
}

// Files are a message's attachments and voice.
type Files struct {
	// Media holds attachments' bytes.
	Media services.Media
	// Transcriber turns the voice notes and audio of a run's message into
	// text before its prompt is built, read from Media (nil: not
	// transcribed; the prompt says so).
	Transcriber services.Transcriber
	// Speaker, when set, speaks answers to voice questions (the channel
	// delivers them; /voice sets it per chat in Store).
	Speaker services.Speaker
}

// Plans are the owner's schedules and what their fires need.
type Plans struct {
	// Schedules are the owner's schedules (/schedules; the schedule tools
	// are given them by the app) and Fires their ledger; nil: no
	// schedules. FireObserved counts fires by result (ok, notified, error,
	// interrupted, unchanged, skipped). Watcher reads a watch schedule's
	// content before its model runs (nil: watch fires fail, saying so).
	Schedules    services.Schedules
	Fires        services.ScheduleFires
	FireObserved func(result string)
	Watcher      services.Watcher
}

// Oversight is what the owner sees and decides the runtime's work through.
type Oversight struct {
	// Catalog lists the tools and MCP servers (/tools, /status); nil: the
	// registry's tools only. Exec is the exec tool's sandbox as /status
	// and /tools show it.
	Catalog services.ToolCatalog
	Exec    services.ExecStatus
	// Budgets reserve each model call's estimate against its kind's daily
	// budget before the call (nil: no budgets); see budget.go.
	Budgets services.Budgets
	// Pairings decide Telegram strangers' requests for /pair (the desk
	// that tells both people; nil: /pair says Telegram is not set up).
	Pairings services.Pairings
	// Audit keeps the audit trail of tool calls, approval decisions and
	// the changes chat commands make (nil: none).
	Audit services.AuditLog
}

// options are what the runtime reads: its collaborators and settings.
type options struct {
	Deps
	Config
}

// Service is the agent runtime.
type Service struct {
	opts options
	log  *slog.Logger

	mu         sync.Mutex
	active     map[int64]context.CancelCauseFunc
	childSlots map[int64]chan struct{}
	// execs are the executions running in this process, by run id
	// (made on first use).
	execs map[int64]*execution
	// lastPrune is when stored requests were last pruned (Unix seconds).
	lastPrune atomic.Int64
}

var (
	_ chat.TurnHandler         = (*Service)(nil)
	_ services.RunExecutor     = (*Service)(nil)
	_ services.FireExecutor    = (*Service)(nil)
	_ services.ApprovalDecider = (*Service)(nil)
)

// New returns the runtime. Its tools are registered by the app
// (app/tools.go): delegate from RegisterDelegate (tools.go), the others
// from services/tools.
func New(d Deps, cfg Config) (*Service, error) {
	if d.Store == nil || d.Chat == nil || d.LLM == nil {
		return nil, errors.New("agent: Store, Chat and LLM are required")
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 12
	}
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = 10 * time.Minute
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Tokenizer == nil {
		d.Tokenizer = prompt.HeuristicTokenizer{}
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 30 * time.Minute
	}
	cfg.SubAgents.defaults()
	cfg.Fire.defaults()
	profiles := make(map[string]Profile, len(cfg.Profiles))
	for id, p := range cfg.Profiles {
		p.ID = id
		profiles[id] = p
	}
	if cfg.Profiles != nil {
		cfg.Profiles = profiles
	}
	return &Service{opts: options{Deps: d, Config: cfg}, log: d.Logger, active: map[int64]context.CancelCauseFunc{}, childSlots: map[int64]chan struct{}{}}, nil
}

// StartTurn runs in the transaction that stores msg, a new user message:
// a message for the agent (and /compact) gets a queued run whose row and job
// commit with the message; after commit the run is announced and, when
// this process has a turn worker free, started here at once (the job
// waits as the fallback: services.RunQueue.StartRunTx). Other commands are
// answered at once after commit.
func (s *Service) StartTurn(ctx context.Context, tx services.Tx, msg services.Message) (func(context.Context), error) {
	if c := msg.Command; c != nil && c.Name != "compact" {
		return func(ctx context.Context) {
			if err := s.command(ctx, msg, c.Name, c.Args); err != nil {
				s.log.Error("answer command", "message_id", msg.ID, "command", c.Name, "err", err)
			}
		}, nil
	}
	run, err := tx.CreateRun(ctx, services.NewRun{
		TimelineScope:    msg.TimelineScope,
		ContextScope:     s.mainScope(),
		TriggerMessageID: msg.ID,
		Source:           msg.Source,
		Status:           services.RunQueued,
		Model:            s.opts.LLM.Model(),
		Announce:         s.opts.TxEvents != nil,
	})
	if err != nil {
		return nil, err
	}
	start, err := s.opts.Queue.StartRunTx(ctx, tx, run)
	if err != nil {
		return nil, err
	}
	// The run's status commits with the message (the other instances hear
	// both at once: the insert sent them when the store could); this
	// instance hears it after the commit.
	queued, status := &endStatus{s: s}, services.RunQueued
	if run.Announced {
		e := runEvent(run, status)
		queued.sent = &e
	} else if err := queued.step(&status)(ctx, tx, &closed{run: run}); err != nil {
		return nil, err
	}
	return func(ctx context.Context) {
		queued.announce(ctx, true, run, services.RunQueued)
		if start != nil {
			start(ctx, msg)
		}
	}, nil
}

// profileLLM is the model of the sub-agent profile id: its own, or the
// main one.
func (s *Service) profileLLM(id string) llm.Provider {
	if p := s.opts.ProfileLLMs[id]; p != nil {
		return p
	}
	return s.opts.LLM
}

// mainScope is the context scope main rows are written with: explicit with
// AGENT_CONTEXT_SCOPED_WRITE, else the column default (also "main").
func (s *Service) mainScope() string {
	if s.opts.Flags.ScopedWrite {
		return services.MainScope
	}
	return ""
}

// CancelRun cancels a run executing in this process (from /stop, which
// reaches every instance as an event).
func (s *Service) CancelRun(runID int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.active[runID]; ok {
		cancel(errStopped)
		return true
	}
	return false
}

func (s *Service) publishRun(ctx context.Context, run services.Run, status services.RunStatus) {
	if s.opts.Publisher == nil {
		return
	}
	if err := s.opts.Publisher.Publish(ctx, runEvent(run, status)); err != nil {
		s.log.Warn("publish run status", "run_id", run.ID, "err", err)
	}
}

// runEvent says run is now status.
func runEvent(run services.Run, status services.RunStatus) services.Event {
	return services.RunEvent(run.TimelineScope, run.ID, status)
}

// endStatus is a run's status event sent with its end's transaction, when
// the publisher sends events with transactions: the other instances hear
// it with the commit (after the answer's own event), this one from
// announce.
type endStatus struct {
	s    *Service
	sent *services.Event
}

// step queues the status the end closed its run with (*status when the
// step runs) in the end's transaction.
func (st *endStatus) step(status *services.RunStatus) closeStep {
	return func(ctx context.Context, tx services.Tx, c *closed) error {
		st.sent = nil
		txp := st.s.opts.TxEvents
		if txp == nil || c.run.ID == 0 {
			return nil
		}
		e := runEvent(c.run, *status)
		if err := txp.PublishTx(ctx, tx, e); err != nil {
			st.s.log.Warn("publish run status", "run_id", c.run.ID, "err", err)
			return nil
		}
		st.sent = &e
		return nil
	}
}

// announce publishes the status after the end: here only, when the end
// committed (every step ran in the transaction that did) and the step sent
// it with the transaction.
func (st *endStatus) announce(ctx context.Context, committed bool, run services.Run, status services.RunStatus) {
	if committed && st.sent != nil {
		st.s.opts.TxEvents.PublishCommitted(ctx, *st.sent)
		return
	}
	st.s.publishRun(ctx, run, status)
}
