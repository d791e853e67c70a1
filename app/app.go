// Package app builds one whole Switchboard instance in dependency order, in
// one place: New constructs every part (no part is attached to another
// afterwards), Start starts the background work, Serve serves HTTP and
// Close stops everything in reverse order. cmd/switchboard maps the
// environment to Config; tests build the same app through app/apptest.
package app

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/channels/openai"
	"github.com/switchboard/switchboard/channels/telegram"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/budget"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/fetch"
	"github.com/switchboard/switchboard/services/hub"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/mcp"
	"github.com/switchboard/switchboard/services/media"
	"github.com/switchboard/switchboard/services/metrics"
	"github.com/switchboard/switchboard/services/payload"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/sandbox"
	"github.com/switchboard/switchboard/services/schedule"
	"github.com/switchboard/switchboard/services/tools"
	"github.com/switchboard/switchboard/web"
)

// Config is an instance's settings: what cmd/switchboard maps the
// environment to (its env table), section by section, and nothing built.
// Each part is built from its own section and its collaborators: New(deps,
// cfg).
type Config struct {
	// DatabaseURL selects the database (a test schema through search_path).
	DatabaseURL string
	// FlagsByDatabase sets the rollout flags' WRITE and READ from what the
	// database is (repository.Store.ContextDefault): on (scoped) for a
	// database this version created, off (legacy) for one upgraded with
	// conversations from before scopes; the other flags stay as given.
	// Off: the flags given in Agent, Chat, Context and Web are used as they
	// are.
	FlagsByDatabase bool
	// PoolSize is the connection pool's size (0: ServePoolSize of what
	// runs) unless DatabaseURL sets pool_max_conns.
	PoolSize int
	// DBWait bounds how long New waits for PostgreSQL to accept a
	// connection when it refuses for having too many (SQLSTATE 53300);
	// 0: 2 minutes, < 0: no wait.
	DBWait time.Duration
	Logger *slog.Logger
	// Stdout gets the owner login token when one is generated (printed once).
	Stdout io.Writer
	// OwnerToken is the owner's login token; empty: the stored one, or a new
	// one generated, stored hashed and printed to Stdout.
	OwnerToken string
	// PublicURL is where users reach the web server (the printed login link).
	PublicURL string
	// WorkspaceDir holds the agents' workspaces; Workspace bounds what the
	// agent writes there and whether it may write the rules files.
	WorkspaceDir string
	Workspace    tools.WriteLimits

	LLM  llm.Config
	Chat chat.Config
	// Context are the prompt manager's settings; New sets its Window to
	// the provider's, its Location when nil to Schedule's, and gives it
	// its collaborators.
	Context prompt.Config
	// SummaryModel is the model compaction's summaries are written with,
	// on LLM's provider (CONTEXT_SUMMARY_MODEL; empty: LLM.Model).
	SummaryModel string
	Agent        agent.Config
	Queue        queue.Options
	Web          web.Config
	Telegram     TelegramConfig
	// Metrics tunes the metrics registry (its sources are the app's).
	Metrics metrics.Options
	// MCP are the MCP servers whose tools the agent gets.
	MCP mcp.Config
	// Fetch bounds the fetch_url tool; Search configures web_search (off
	// without a URL).
	Fetch  fetch.Options
	Search fetch.SearchOptions
	// Schedule is the owner's time zone and the limits of schedules.
	Schedule ScheduleOptions
	// Media bounds attachments and configures their transcription.
	Media MediaOptions
	// Exec turns on the exec tool and sets its sandbox's limits.
	Exec ExecOptions
	// Budget are the daily token and money budgets per kind of run.
	Budget BudgetOptions
	// OpenAI is the OpenAI-compatible channel's settings (its collaborators
	// and the rest of its settings are the app's).
	OpenAI openai.Config
	// Hooks give parts collaborators of a test's own; zero: New's.
	Hooks Hooks
}

// Hooks give parts collaborators of a test's own instead of New's.
type Hooks struct {
	// Web sees and changes the web server's collaborators (a counting
	// store) before it is built.
	Web func(*web.Deps)
	// TelegramClient makes the Bot API calls (an emulator's transport;
	// nil: a default client).
	TelegramClient *http.Client
	// Turns answers new user messages instead of the agent runtime.
	Turns chat.TurnHandler
	// Context sees and changes the prompt manager's collaborators (a
	// fixed clock, so prompts are the same bytes run after run) before
	// it is built.
	Context func(*prompt.Deps)
}

// BudgetOptions configure the daily budgets (BUDGET_DAILY_TOKENS,
// BUDGET_DAILY_USD) and the model prices (LLM_PRICES; nil: the defaults).
type BudgetOptions struct {
	Limits budget.Limits
	Money  budget.MoneyLimits
	Prices budget.Prices
}

// ExecOptions configure the exec tool: offered when Enabled and the
// sandbox works (probed once in New), never without the sandbox.
type ExecOptions struct {
	Enabled bool
	sandbox.Options
}

// MediaOptions configure attachments: the largest file (0: the default,
// 20 MB), the speech-to-text API and the text-to-speech API of spoken
// replies (empty URL: none).
type MediaOptions struct {
	MaxBytes                                         int64
	TranscribeURL, TranscribeModel, TranscribeAPIKey string
	TTSURL, TTSModel, TTSVoice, TTSAPIKey            string
}

// ScheduleOptions configure schedules.
type ScheduleOptions struct {
	// Location is the owner's time zone (nil: the server's).
	Location *time.Location
	Limits   schedule.Limits
}

// TelegramConfig are the Telegram channel's settings; an empty Token
// leaves the channel off (the pairing page still works).
type TelegramConfig struct {
	telegram.Config
	// Mode is "polling" (default) or "webhook".
	Mode          string
	WebhookURL    string
	WebhookSecret string
}

// App is one built instance.
type App struct {
	cfg      Config
	log      *slog.Logger
	pool     *pgxpool.Pool
	migrator *repository.Migrator
	store    *repository.Store
	hub      *hub.Hub
	notifier *repository.Notifier
	provider llm.Provider
	spaces   *tools.Workspaces
	payloads *payload.Builder
	sandbox  *sandbox.Sandbox
	media    *media.Store
	meter    *metrics.Metrics
	mcp      *mcp.Manager
	chat     *chat.Service
	agent    *agent.Service
	queue    *queue.Queue
	bot      *telegram.Bot
	typing   *telegram.Typing
	web      *web.Server

	// What New builds on the way, for the parts built after it.
	tokenHash   []byte
	publisher   services.TxPublisher
	tokenizer   prompt.Tokenizer
	registry    *tools.Registry
	watcher     *fetch.Fetcher
	summariser  llm.Provider
	context     *prompt.Manager
	execStatus  services.ExecStatus
	enqueuer    *queue.Enqueuer
	scheduler   *schedule.Service
	budgets     *budget.Service
	transcriber services.Transcriber
	speaker     services.Speaker
	profileLLMs map[string]llm.Provider
	desk        *telegram.Desk

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
}

// New builds every part of the instance in dependency order: the database
// (migrated), the hub, the model provider, the metrics, the context
// manager, the queue's client, ChatService, the schedules and budgets, the
// agent runtime and its tools (tools.go), the Telegram channel, the queue's
// workers and the web server. Nothing runs until Start. On error whatever
// was built is closed.
func New(ctx context.Context, cfg Config) (a *App, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = ServePoolSize(PoolNeeds{TurnWorkers: cfg.Queue.TurnWorkers, Deliveries: cfg.Telegram.Token != ""})
	}
	a = &App{cfg: cfg, log: cfg.Logger}
	built := a // a is nil once a `return nil, err` has run
	defer func() {
		if err != nil {
			built.Close(context.Background())
			a = nil
		}
	}()
	steps := []func(context.Context) error{
		a.buildDatabase, // the pool (migrated), the store, the flags, the owner's token
		a.buildEvents,   // the hub and the cross-instance notifier
		a.buildModel,    // the providers, the workspaces, media, metrics, MCP, exec
		a.buildContext,  // the context manager and the context payloads
		a.buildChat,     // the queue's client and ChatService
		a.buildPlans,    // schedules and daily budgets
		a.buildAgent,    // the agent runtime, then every tool (tools.go)
		a.buildTelegram, // the Telegram channel (off without a token)
		a.buildQueue,    // the queue's workers
		a.buildWeb,      // the web server, last: it reads from everything above
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// buildDatabase opens the database, applies pending migrations, settles
// the flags and reads (or makes) the owner's token.
func (a *App) buildDatabase(ctx context.Context) (err error) {
	if err := a.openDatabase(ctx, a.cfg, a.log); err != nil {
		return err
	}
	a.store = repository.New(a.pool)
	if a.cfg.FlagsByDatabase {
		if a.cfg, err = flagsByDatabase(ctx, a.cfg, a.store); err != nil {
			return err
		}
	}
	a.tokenHash, err = ownerToken(ctx, a.cfg, a.store)
	return err
}

// buildEvents builds the hub, which fans out this instance's events, and,
// through the notifier, every instance's.
func (a *App) buildEvents(ctx context.Context) (err error) {
	a.hub = hub.New(a.store, a.log)
	if a.notifier, err = repository.NewNotifier(ctx, a.pool, a.log); err != nil {
		return err
	}
	a.publisher = hub.Fanout{Hub: a.hub, Remote: a.notifier}
	a.store.AnnounceClaims(a.notifier) // a claimed run's status goes with its claim
	return nil
}

// buildModel builds the model provider (and the summariser's), the tool
// registry, the workspaces, media, the fetcher watch schedules read
// through, the exec sandbox, the metrics and the MCP manager.
func (a *App) buildModel(ctx context.Context) (err error) {
	cfg, log := a.cfg, a.log
	// The encoding loads with the first message, not at start: it is most
	// of the idle heap and of the start time (docs/BENCHMARKS.md). One
	// table of remembered counts serves every part that counts (the prompt
	// build, the budget's reservation before each model call, tool
	// selection): they count the same texts every turn.
	a.tokenizer = prompt.Memo(prompt.NewLazyTokenizer(cfg.LLM.Model, func(warn error) {
		log.Warn("tokenizer fell back to an estimate", "code", services.ErrorCode(warn), "err", warn)
	}))
	if a.provider, err = llm.New(cfg.LLM); err != nil {
		return err
	}
	a.summariser = a.provider
	if cfg.SummaryModel != "" && cfg.SummaryModel != cfg.LLM.Model {
		c := cfg.LLM
		c.Model = cfg.SummaryModel
		if a.summariser, err = llm.New(c); err != nil {
			return fmt.Errorf("CONTEXT_SUMMARY_MODEL: %w", err)
		}
	}
	if a.profileLLMs, err = profileProviders(cfg.Agent.Profiles, cfg.LLM); err != nil {
		return err
	}
	a.registry = tools.NewRegistry(log)
	a.spaces = tools.NewWorkspacesWith(cfg.WorkspaceDir, cfg.Workspace)
	a.media = media.New(a.spaces.For, cfg.Media.MaxBytes)
	if t := media.NewTranscriber(cfg.Media.TranscribeURL, cfg.Media.TranscribeModel, cfg.Media.TranscribeAPIKey); t != nil {
		a.transcriber = t
	}
	if s := media.NewSpeaker(cfg.Media.TTSURL, cfg.Media.TTSModel, cfg.Media.TTSVoice, cfg.Media.TTSAPIKey); s != nil {
		a.speaker = s
	}
	// Watch schedules read their page through the same guard as
	// fetch_url, without the model.
	if a.watcher, err = fetch.New(cfg.Fetch); err != nil {
		return fmt.Errorf("FETCH_ALLOW: %w", err)
	}
	a.execStatus = a.buildExec(ctx)
	mo := cfg.Metrics
	mo.Source, mo.Runs, mo.Logger = a.store, a.store, log
	a.meter = metrics.New(mo)
	a.mcp = mcp.New(cfg.MCP, mcp.Options{Logger: log, Registry: a.registry, Observe: a.meter.MCPCallObserved})
	return nil
}

// buildContext builds the context manager and the context payloads
// (`switchboard context`).
func (a *App) buildContext(context.Context) (err error) {
	cfg := a.cfg.Context
	// The store is also the archive handoffs are recalled from, and reads
	// a build's sources (Context's and Budgets') in one statement.
	d := prompt.Deps{Store: a.store, Context: a.store, Workspace: a.spaces, Manifests: a.spaces, Budgets: a.store, Sources: a.store,
		Tokenizer: a.tokenizer, Recall: a.store, HistoryRule: historyRule(a.registry), Attachments: a.store, Media: a.media,
		// Summaries are paid from the daily budgets too (a.budgets is built
		// before any compaction runs).
		Summariser: budgetedSummariser{Provider: a.summariser, a: a}, OnCompaction: a.meter.CompactionObserved, Logger: a.log}
	// The window is the model's (LLM_CONTEXT_WINDOW or the provider's default).
	cfg.Window = a.provider.ContextWindow()
	if cfg.Location == nil {
		// The owner's zone (OWNER_TIMEZONE) dates the prompt's input and
		// the summariser's transcript, as it does schedules.
		cfg.Location = a.cfg.Schedule.Location
	}
	if a.cfg.Hooks.Context != nil {
		a.cfg.Hooks.Context(&d)
	}
	if a.context, err = prompt.New(d, cfg); err != nil {
		return err
	}
	a.payloads = payload.New(payload.Options{Recall: a.store, Rows: a.store, Runs: a.store, Files: a.spaces, Known: a.knownProfile,
		Profiles: payloadProfiles(a.cfg.Agent.Profiles)})
	return nil
}

// knownProfile says whether a sub-agent profile is configured.
// payloadProfiles are the context payload's budget profiles the
// sub-agent profiles name ("context"); the others get the default.
func payloadProfiles(profiles map[string]agent.Profile) map[string]payload.Profile {
	out := map[string]payload.Profile{}
	for id, p := range profiles {
		if p.Context != nil {
			out[id] = *p.Context
		}
	}
	return out
}

func (a *App) knownProfile(name string) bool { _, ok := a.cfg.Agent.Profiles[name]; return ok }

// buildChat builds the queue's insert-only client (jobs are inserted in
// the caller's transaction; the workers are built last, from the parts
// that execute them) and ChatService, which routes replies to Telegram
// through the queue in the reply's own transaction and hands each new user
// message to the agent runtime (a.startTurn) or to a test's own handler.
func (a *App) buildChat(ctx context.Context) (err error) {
	if a.enqueuer, err = queue.NewEnqueuer(ctx, a.pool, a.log); err != nil {
		return err
	}
	d := chat.Deps{Store: a.store, Publisher: a.publisher, TxEvents: a.publisher, Logger: a.log, CountTokens: a.tokenizer.Count, Turns: a.cfg.Hooks.Turns}
	if d.Turns == nil {
		d.Turns = chat.TurnFunc(a.startTurn)
	}
	if a.cfg.Telegram.Token != "" {
		router := telegram.Router{Queue: a.enqueuer, OwnerChats: a.cfg.Telegram.OwnerIDs, Speak: a.speaker != nil}
		d.Routers = map[services.Source]services.ReplyRouter{services.SourceTelegram: router}
		d.Notifiers = []services.Notifier{router}
	}
	a.chat = chat.New(d, a.cfg.Chat)
	// The pairing desk decides Telegram strangers' requests for the page,
	// the buttons and /pair, and tells both people (its notices need no
	// turn).
	a.desk = &telegram.Desk{Store: repository.NewTelegramStore(a.pool), Chat: a.chat, Queue: a.enqueuer,
		Owners: a.cfg.Telegram.OwnerIDs, Logger: a.log}
	return nil
}

// startTurn hands a new user message to the agent runtime. ChatService is
// built before the runtime, which posts its answers through it; the
// runtime is a.agent from buildAgent on, before anything is posted.
func (a *App) startTurn(ctx context.Context, tx services.Tx, msg services.Message) (func(context.Context), error) {
	return a.agent.StartTurn(ctx, tx, msg)
}

// buildPlans builds the owner's schedules (their controls and the fire
// ledger; the agent runs the fires) and the daily budgets per kind of run,
// in the owner's zone (the 80 % notice goes to the owner's timeline and
// channels).
func (a *App) buildPlans(context.Context) error {
	cfg := a.cfg
	a.scheduler = schedule.New(schedule.Options{Store: a.store, Queue: a.enqueuer, Location: cfg.Schedule.Location,
		Limits: cfg.Schedule.Limits, Profiles: a.knownProfile, Watcher: a.watcher})
	prices := cfg.Budget.Prices
	if prices == nil {
		prices = budget.DefaultPrices
	}
	// A money budget needs a price for every model a run may call.
	models := []string{cfg.LLM.Model}
	if cfg.SummaryModel != "" {
		models = append(models, cfg.SummaryModel)
	}
	for _, p := range cfg.Agent.Profiles {
		models = append(models, p.Model)
	}
	if err := budget.CheckPriced(cfg.Budget.Money, prices, models...); err != nil {
		return err
	}
	a.budgets = budget.New(budget.Options{Store: a.store, Limits: cfg.Budget.Limits, Money: cfg.Budget.Money, Prices: prices,
		Location: cfg.Schedule.Location, Chat: a.chat, Observe: a.meter.BudgetObserved, Logger: a.log})
	return nil
}

// buildAgent builds the agent runtime (profiles with a model of their own
// get a provider of their own, same server and key) and registers every
// tool (tools.go).
func (a *App) buildAgent(context.Context) (err error) {
	cfg := a.cfg
	// The Telegram "typing…" indicator, which the agent runtime drives.
	observers := []services.RunObserver{a.meter}
	if t := cfg.Telegram; t.Token != "" {
		if a.typing, err = telegram.NewTyping(t.Token, t.APIURL, cfg.Hooks.TelegramClient, t.TypingEvery); err != nil {
			return err
		}
		observers = []services.RunObserver{a.typing, a.meter}
	}
	ac := cfg.Agent
	// The service's own secrets: never in a prompt, refused in an outbound
	// tool argument (the configuration adds its secret variables and the
	// MCP values marked secret).
	if ac.Secrets == nil {
		ac.Secrets = services.NewSecrets()
	}
	ac.Secrets.Add(cfg.OwnerToken, hex.EncodeToString(a.tokenHash), cfg.LLM.APIKey, cfg.Telegram.Token, cfg.Telegram.WebhookSecret,
		cfg.Media.TranscribeAPIKey, cfg.Media.TTSAPIKey, hex.EncodeToString(cfg.Web.ScrapeTokenHash))
	a.agent, err = agent.New(agent.Deps{
		Store: a.store, Chat: a.chat, LLM: a.provider, ProfileLLMs: a.profileLLMs, Queue: a.enqueuer, Compactions: a.enqueuer, Context: a.context,
		Tools: a.registry, Publisher: a.publisher, TxEvents: a.publisher, Observers: observers, Logger: a.log,
		Memory: agent.Memory{ContextStore: a.store, Manifests: a.spaces, Recall: a.store, Proposals: a.store, Tokenizer: a.tokenizer},
		Files:  agent.Files{Media: a.media, Transcriber: a.transcriber, Speaker: a.speaker},
		Plans:  agent.Plans{Schedules: a.scheduler, Fires: a.scheduler, FireObserved: a.meter.FireObserved, Watcher: a.watcher},
		// Tool calls that last or leave, and every approval decision, go
		// to the hash-chained audit trail.
		Oversight: agent.Oversight{Catalog: a.mcp, Exec: a.execStatus, Budgets: a.budgets, Pairings: a.pairings(), Audit: a.store},
	}, ac)
	if err != nil {
		return err
	}
	return a.registerTools()
}

// pairings is the desk for /pair when Telegram is set up (nil: /pair says
// it is not).
func (a *App) pairings() services.Pairings {
	if a.cfg.Telegram.Token == "" {
		return nil
	}
	return a.desk
}

// buildTelegram builds, with a token, the Telegram channel: it stores
// inbound messages through ChatService and delivers through the queue.
func (a *App) buildTelegram(ctx context.Context) (err error) {
	tstore := repository.NewTelegramStore(a.pool)
	tc := a.cfg.Telegram
	if tc.Token == "" {
		return nil
	}
	d := telegram.Deps{Chat: a.chat, Store: tstore, Queue: a.enqueuer, Leases: telegramLeases{tstore}, Media: a.media, Speaker: a.speaker,
		Approvals: a.agent, Pairings: a.desk, Audit: a.store, Logger: a.log, SendError: a.meter.TelegramSendError,
		HTTPClient: a.cfg.Hooks.TelegramClient}
	if a.bot, err = telegram.New(ctx, d, tc.Config); err != nil {
		return err
	}
	if len(tc.OwnerIDs) == 0 {
		a.log.Warn("TELEGRAM_OWNER_IDS is empty: nobody on Telegram writes to the owner's timeline")
	}
	return nil
}

// buildQueue builds the queue's workers: agent turns, fires, compactions
// and outbound deliveries.
func (a *App) buildQueue(ctx context.Context) (err error) {
	qo := a.cfg.Queue
	qo.Outbound = map[services.Source]services.OutboundHandler{}
	if a.bot != nil {
		qo.Outbound[telegram.Channel] = a.bot.Deliver
	}
	qo.Logger, qo.Fires, qo.Compactions = a.log, a.agent, a.agent
	// The runtime inserts runs' jobs through a.enqueuer: once the queue is
	// started, a run whose message this process stored starts here at once.
	qo.Starts = []*queue.Enqueuer{a.enqueuer}
	a.queue, err = queue.New(ctx, a.pool, a.store, a.agent, qo)
	return err
}

// buildWeb builds the web server.
func (a *App) buildWeb(context.Context) error {
	cfg := a.cfg
	d := web.Deps{
		Logger: a.log, Chat: a.chat, Hub: a.hub, TokenHash: a.tokenHash, Sessions: a.store, Ready: a.ready,
		ContextStore: a.store, Inspector: a.agent, Manifests: a.spaces, ContextBudgets: a.store,
		Blocks: workspaceBlocks{spaces: a.spaces, count: a.tokenizer.Count}, Tools: a.mcp,
		Activity: a.store, Debug: a.store, Pairings: a.desk, Schedules: a.scheduler, Budgets: a.budgets,
		Approvals: a.agent, ToolResults: a.agent, Media: a.media, Attachments: a.store, Audit: a.store,
		Metrics: web.Metrics{Handler: a.meter.Handler(), Requests: a.meter, Websockets: a.meter},
	}
	wc := cfg.Web
	wc.Model, wc.Provider, wc.MaxMessageBytes = a.provider.Model(), a.provider.Name(), cfg.Chat.MaxContentBytes
	if wc.MaxMessageBytes <= 0 {
		wc.MaxMessageBytes = chat.DefaultMaxContentBytes
	}
	oc := cfg.OpenAI
	oc.OwnerTimeline, oc.Provider, oc.MaxMessageBytes = wc.OwnerTimeline, wc.Provider, wc.MaxMessageBytes
	d.OpenAI = openai.New(openai.Deps{Logger: a.log, Chat: a.chat, Hub: a.hub, Runs: a.store, Media: a.media, Stopper: a.agent}, oc)
	if a.bot != nil && cfg.Telegram.Mode == "webhook" {
		d.TelegramWebhook = a.bot.WebhookHandler(cfg.Telegram.WebhookSecret)
	}
	if cfg.OwnerToken == "" {
		// The stored token is read on each authentication, so `switchboard
		// token reset` takes effect at once on every instance.
		d.Credentials = a.store
	}
	if cfg.Hooks.Web != nil {
		cfg.Hooks.Web(&d)
	}
	a.web = web.New(d, wc)
	return nil
}

// buildExec probes the exec sandbox when EXEC_ENABLED; the status says
// whether the exec tool is offered (tools.go) and why not otherwise.
func (a *App) buildExec(ctx context.Context) services.ExecStatus {
	o := a.cfg.Exec
	if !o.Enabled {
		return services.ExecStatus{}
	}
	o.Logger = a.log
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = a.cfg.Workspace.Workspace
	}
	a.sandbox = sandbox.New(ctx, o.Options)
	return services.ExecStatus{Enabled: true, Reason: a.sandbox.Reason(), Limits: a.sandbox.Limits()}
}

// Start starts the background work: the hub, the cross-instance event
// listener, the queue's workers and the Telegram channel (polling, or
// setting the webhook). It serves no HTTP; see Serve.
// approvalSweep is how often overdue approvals are timed out.
var approvalSweep = 15 * time.Second

func (a *App) Start(ctx context.Context) error {
	if a.started {
		return errors.New("app: started twice")
	}
	a.started = true
	ctx, a.cancel = context.WithCancel(ctx)
	// MCP servers start in the background: their tools join the registry
	// as each one is ready.
	a.mcp.Start(ctx)
	a.wg.Add(3)
	go func() { defer a.wg.Done(); a.hub.Run(ctx) }()
	// Approvals nobody decided in time time out (on every instance; each
	// one exactly once).
	go func() { defer a.wg.Done(); a.agent.SweepApprovals(ctx, approvalSweep) }()
	// Events from every instance: /stop reaches the instance running the run.
	go func() {
		defer a.wg.Done()
		a.notifier.Listen(ctx, func(e services.Event) {
			if e.Type == agent.EventCancel {
				a.agent.CancelRun(e.RunID)
				return
			}
			a.hub.Notify(e)
		}, a.hub.Resync)
	}()
	if err := a.queue.Start(ctx); err != nil {
		return err
	}
	if a.bot != nil {
		a.startTelegram(ctx)
	}
	return nil
}

// startTelegram sets the command menu if it changed, then polls
// (leader-elected) or sets the webhook.
func (a *App) startTelegram(ctx context.Context) {
	log, b, t := a.log, a.bot, a.cfg.Telegram
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if called, err := b.SyncCommands(cctx); err != nil {
			log.Warn("telegram: setMyCommands failed; the command menu is unchanged", "err", err)
		} else if called {
			log.Info("telegram: command menu updated")
		}
	}()
	if t.Mode == "webhook" {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := b.SetWebhook(sctx, t.WebhookURL, t.WebhookSecret)
		cancel()
		if err != nil {
			// Updates still arrive if an earlier start set the webhook.
			log.Warn("telegram: setWebhook failed", "err", err)
		}
		log.Info("telegram channel started", "mode", "webhook", "bot_id", b.BotID())
		return
	}
	a.wg.Add(1)
	go func() { defer a.wg.Done(); b.RunPolling(ctx) }()
	log.Info("telegram channel started", "mode", "polling", "bot_id", b.BotID())
}

// Serve serves HTTP on l until Close (nil then).
func (a *App) Serve(l net.Listener) error { return a.web.Serve(l) }

// Close stops everything in reverse order: HTTP (waiting for requests in
// flight, bounded by ctx), the Telegram channel, the queue (finishing jobs
// in flight, bounded by ctx), the background work, the database.
func (a *App) Close(ctx context.Context) {
	if a.web != nil {
		_ = a.web.Shutdown(ctx)
	}
	if a.queue != nil && a.started {
		_ = a.queue.Stop(ctx) // deliveries in flight still have the bot
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	if a.mcp != nil {
		a.mcp.Close()
	}
	if a.typing != nil {
		a.typing.Close()
	}
	if a.spaces != nil {
		a.spaces.Close()
	}
	if a.sandbox != nil {
		_ = a.sandbox.Close()
	}
	if a.migrator != nil {
		a.migrator.Close()
	}
	if a.pool != nil {
		a.pool.Close()
	}
}

// Handler is the web server's root handler (httptest servers).
func (a *App) Handler() http.Handler { return a.web.Handler() }

// Config is the configuration the instance was built with (the flags
// settled by FlagsByDatabase).
func (a *App) Config() Config { return a.cfg }

// Registry holds the agent's tools (tools.go and the MCP servers').
func (a *App) Registry() *tools.Registry { return a.registry }

// Context is the instance's context manager.
func (a *App) Context() *prompt.Manager { return a.context }

// Summariser writes compaction's summaries (CONTEXT_SUMMARY_MODEL).
func (a *App) Summariser() llm.Provider { return a.summariser }

// Transcriber turns voice notes into text (nil: TRANSCRIBE_URL unset).
func (a *App) Transcriber() services.Transcriber { return a.transcriber }

// Speaker turns answers into voice notes (nil: TTS_URL unset).
func (a *App) Speaker() services.Speaker { return a.speaker }

// ProfileLLMs are the providers of the sub-agent profiles with a model of
// their own.
func (a *App) ProfileLLMs() map[string]llm.Provider { return a.profileLLMs }

// Store is the instance's database store.
func (a *App) Store() *repository.Store { return a.store }

// Pool is the instance's connection pool.
func (a *App) Pool() *pgxpool.Pool { return a.pool }

// Chat is the instance's ChatService.
func (a *App) Chat() *chat.Service { return a.chat }

// Hub is the instance's event hub.
func (a *App) Hub() *hub.Hub { return a.hub }

// Agent is the instance's agent runtime.
func (a *App) Agent() *agent.Service { return a.agent }

// Tools lists the agent's tools and MCP servers.
func (a *App) Tools() *mcp.Manager { return a.mcp }

// Queue is the instance's job queue.
func (a *App) Queue() *queue.Queue { return a.queue }

// Provider is the main model provider.
func (a *App) Provider() llm.Provider { return a.provider }

// Metrics is the instance's metrics.
func (a *App) Metrics() *metrics.Metrics { return a.meter }

// Web is the instance's web server.
func (a *App) Web() *web.Server { return a.web }

// Payloads build the context payloads of spec 000 (`switchboard context`).
func (a *App) Payloads() *payload.Builder { return a.payloads }

// Bot is the Telegram channel (nil when off).
func (a *App) Bot() *telegram.Bot { return a.bot }

func (a *App) ready(ctx context.Context) error {
	if err := a.pool.Ping(ctx); err != nil {
		return errors.New("database unreachable")
	}
	if pending, err := a.migrator.Pending(ctx); err != nil || pending {
		return errors.New("migrations not current")
	}
	return nil
}

// ownerToken returns the hash of the owner's login token: OwnerToken's, or
// a stored one, or a new one generated, stored (hashed) and printed once.
func ownerToken(ctx context.Context, o Config, store *repository.Store) ([]byte, error) {
	if o.OwnerToken != "" {
		return web.HashToken(o.OwnerToken), nil
	}
	tok := web.NewToken()
	hash, created, err := store.InitOwnerTokenHash(ctx, web.HashToken(tok))
	if err != nil {
		return nil, err
	}
	if created {
		fmt.Fprintf(o.Stdout, "\nOwner login token generated (shown once; only its hash is stored):\n  %s\nLog in at:\n  %s/login?token=%s\n\n", tok, o.PublicURL, tok)
	}
	return hash, nil
}

// historyRule is the tool registry's rule for keeping a tool's results in
// history.
func historyRule(registry *tools.Registry) func(string) (prompt.CompressionRule, bool) {
	return func(name string) (prompt.CompressionRule, bool) {
		t, ok := registry.Get(name)
		if !ok {
			return prompt.CompressionRule{}, false
		}
		return prompt.CompressionRule{MaxChars: t.History.MaxChars, KeepFields: t.History.KeepFields, DropFields: t.History.DropFields,
			Form: t.History.Form}, true
	}
}

// profileProviders gives each profile with a model other than the main
// one a provider of its own (same server and key), by profile id.
func profileProviders(in map[string]agent.Profile, main llm.Config) (map[string]llm.Provider, error) {
	var out map[string]llm.Provider
	for id, p := range in {
		if p.Model == "" || p.Model == main.Model {
			continue
		}
		c := main
		c.Model = p.Model
		provider, err := llm.New(c)
		if err != nil {
			return nil, fmt.Errorf("AGENT_PROFILES: profile %q: %w", id, err)
		}
		if out == nil {
			out = map[string]llm.Provider{}
		}
		out[id] = provider
	}
	return out, nil
}

// PoolNeeds is what holds connections in one instance.
type PoolNeeds struct {
	// TurnWorkers is the queue's TurnWorkers (0: the default 16; < 0:
	// this instance answers no turns).
	TurnWorkers int
	// Deliveries: a channel (Telegram) delivers through the outbound lanes.
	Deliveries bool
}

// poolOverhead is what holds a connection besides the workers: River's
// leader, producer and LISTEN (3), the event LISTEN (1), the Telegram
// lease (1), web requests and the reapers (4).
const poolOverhead = 9

// ServePoolSize is the connection pool an instance needs for what it runs:
// each agent worker holds one connection for its timeline's run lock while
// the run's queries use another, and so does each outbound lane worker (only
// when a channel delivers through the lanes), each schedule worker and each
// compaction worker; plus poolOverhead. A pool smaller than that can
// deadlock: every connection holds a lock and waits for a second one.
// The pool opens connections only when they are needed and closes them
// after MaxConnIdle idle (repository.Open), so this is a ceiling, not what
// an idle instance holds.
func ServePoolSize(n PoolNeeds) int {
	workers := n.TurnWorkers
	if workers == 0 {
		workers = 16
	}
	lockers := max(workers, 0) + queue.ScheduleWorkers + queue.CompactionWorkers
	if n.Deliveries {
		lockers += queue.OutboundWorkers
	}
	return 2*lockers + poolOverhead
}

// openDatabase opens the pool and applies pending migrations. While
// PostgreSQL refuses connections for having too many (another instance or
// client holds them), it waits and tries again, logging each wait, for at
// most o.DBWait.
func (a *App) openDatabase(ctx context.Context, o Config, log *slog.Logger) error {
	wait := o.DBWait
	if wait == 0 {
		wait = 2 * time.Minute
	}
	deadline := time.Now().Add(wait)
	for pause := time.Second; ; pause = min(2*pause, 10*time.Second) {
		err := a.openAndMigrate(ctx, log)
		if err == nil || !repository.IsTooManyConnections(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		log.Warn("PostgreSQL has too many connections; waiting to start", "retry_in", pause, "gives_up_at", deadline.Format(time.RFC3339), "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

func (a *App) openAndMigrate(ctx context.Context, log *slog.Logger) (err error) {
	if a.pool, err = repository.Open(ctx, WithPoolSize(a.cfg.DatabaseURL, a.cfg.PoolSize)); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if a.migrator != nil {
				_ = a.migrator.Close()
			}
			a.pool.Close()
			a.pool, a.migrator = nil, nil
		}
	}()
	if a.migrator, err = repository.NewMigrator(a.pool); err != nil {
		return err
	}
	applied, err := a.migrator.Up(ctx)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}
	return nil
}

// WithPoolSize sets pool_max_conns on a database URL (URL or key=value
// form) unless the operator set it.
func WithPoolSize(dsn string, n int) string {
	return repository.WithParam(dsn, "pool_max_conns", strconv.Itoa(n))
}

// flagsByDatabase gives o the rollout flags of what the database is
// (Config.FlagsByDatabase) and checks the result.
func flagsByDatabase(ctx context.Context, o Config, store *repository.Store) (Config, error) {
	mode, err := store.ContextDefault(ctx)
	if err != nil {
		return o, err
	}
	f := o.Agent.Flags
	f.ScopedWrite, f.ScopedRead, f.Origin = mode == "scoped", mode == "scoped", services.FlagsFromNewDB
	if mode != "scoped" {
		f.Origin = services.FlagsFromLegacyDB
	}
	if err := f.Validate(); err != nil {
		return o, err
	}
	o.Agent.Flags, o.Web.Flags = f, f
	o.Chat.ScopedWrite = f.ScopedWrite
	o.Context.ScopedRead = f.ScopedRead
	o.Context.Compaction.ScopedWrite = f.ScopedWrite
	return o, nil
}

// NewPairingDesk is the owner's side of pairing outside a serving process
// (`switchboard pair approve`): it decides through the database, queues
// the stranger's message and the edit of the request in the owner's chats
// (owners), which a serving process sends, and posts the decision's notice
// to the owner's timeline, which running instances show at once. Call
// done before the process exits: it waits for that notice's event.
func NewPairingDesk(ctx context.Context, pool *pgxpool.Pool, owners []int64, log *slog.Logger) (desk services.Pairings, done func(), err error) {
	enq, err := queue.NewEnqueuer(ctx, pool, log)
	if err != nil {
		return nil, nil, err
	}
	notifier, err := repository.NewNotifier(ctx, pool, log)
	if err != nil {
		return nil, nil, err
	}
	// This process's one ChatService: it posts notices, and no message here
	// starts a turn.
	poster := chat.New(chat.Deps{Store: repository.New(pool), Publisher: notifier, TxEvents: notifier, Logger: log}, chat.Config{})
	done = func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		notifier.Flush(flush)
	}
	return &telegram.Desk{Store: repository.NewTelegramStore(pool), Chat: poster, Queue: enq, Owners: owners, Logger: log}, done, nil
}
