// Package app builds one whole Switchboard instance in dependency order, in
// one place: New constructs every part (no part is attached to another
// afterwards), Start starts the background work, Serve serves HTTP and
// Close stops everything in reverse order. cmd/switchboard maps the
// environment to Options; tests build the same app through app/apptest.
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

// Options are an instance's settings. The option structs of the parts carry
// their settings only: New fills in their collaborators (stores, providers,
// the queue, the hub), so a setting given here reaches its part whole.
type Options struct {
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

	LLM     llm.Config
	Chat    chat.Options
	Context prompt.Options
	// SummaryModel is the model compaction's summaries are written with,
	// on LLM's provider (CONTEXT_SUMMARY_MODEL; empty: LLM.Model).
	SummaryModel string
	Agent        agent.Options
	Queue        queue.Options
	Web          web.Options
	Telegram     TelegramOptions
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
// 20 MB) and the speech-to-text API (empty URL: none).
type MediaOptions struct {
	MaxBytes                                         int64
	TranscribeURL, TranscribeModel, TranscribeAPIKey string
}

// ScheduleOptions configure schedules.
type ScheduleOptions struct {
	// Location is the owner's time zone (nil: the server's).
	Location *time.Location
	Limits   schedule.Limits
}

// TelegramOptions are the Telegram channel's settings; an empty Token
// leaves the channel off (the pairing page still works).
type TelegramOptions struct {
	telegram.Options
	// Mode is "polling" (default) or "webhook".
	Mode          string
	WebhookURL    string
	WebhookSecret string
}

// App is one built instance.
type App struct {
	opts     Options
	built    Options
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

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
}

// New builds every part of the instance in dependency order: the database
// (migrated), the hub, the model provider and tools, the metrics, the
// context manager, the queue, ChatService, the Telegram channel, the agent
// runtime and the web server. Nothing runs until Start. On error whatever
// was built is closed.
func New(ctx context.Context, o Options) (a *App, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	a = &App{opts: o, log: o.Logger}
	built := a // a is nil once a `return nil, err` has run
	defer func() {
		if err != nil {
			built.Close(context.Background())
			a = nil
		}
	}()
	log := o.Logger
	b := &a.built
	b.DatabaseURL, b.PoolSize, b.Logger, b.Stdout, b.PublicURL, b.WorkspaceDir = o.DatabaseURL, o.PoolSize, log, o.Stdout, o.PublicURL, o.WorkspaceDir
	b.Workspace = o.Workspace
	if b.PoolSize <= 0 {
		b.PoolSize = ServePoolSize(PoolNeeds{TurnWorkers: o.Queue.TurnWorkers, Deliveries: o.Telegram.Token != ""})
	}

	// Database, migrated.
	if err := a.openDatabase(ctx, o, log); err != nil {
		return nil, err
	}
	a.store = repository.New(a.pool)
	if o.FlagsByDatabase {
		if o, err = flagsByDatabase(ctx, o, a.store); err != nil {
			return nil, err
		}
		a.opts = o
	}
	tokenHash, err := ownerToken(ctx, o, a.store)
	if err != nil {
		return nil, err
	}

	// Events: the hub fans out this instance's events and, through the
	// notifier, every instance's.
	a.hub = hub.New(a.store, log)
	if a.notifier, err = repository.NewNotifier(ctx, a.pool, log); err != nil {
		return nil, err
	}
	publisher := hub.Fanout{Hub: a.hub, Remote: a.notifier}

	// Model, tools, metrics and the context manager.
	// The encoding loads with the first message, not at start: it is most
	// of the idle heap and of the start time (docs/BENCHMARKS.md).
	tokenizer := prompt.NewLazyTokenizer(o.LLM.Model, func(warn error) {
		log.Warn("tokenizer fell back to an estimate", "code", services.ErrorCode(warn), "err", warn)
	})
	b.LLM = o.LLM
	if a.provider, err = llm.New(b.LLM); err != nil {
		return nil, err
	}
	registry := tools.NewRegistry(log)
	a.spaces = tools.NewWorkspacesWith(o.WorkspaceDir, o.Workspace)
	if err := tools.RegisterWorkspaceTools(registry, a.spaces.For); err != nil {
		return nil, err
	}
	b.Media = o.Media
	a.media = media.New(a.spaces.For, o.Media.MaxBytes)
	if err := agent.RegisterMemoryTool(registry, a.store); err != nil {
		return nil, err
	}
	b.Fetch = o.Fetch
	if err := fetch.Register(registry, o.Fetch); err != nil {
		return nil, fmt.Errorf("FETCH_ALLOW: %w", err)
	}
	// Watch schedules read their page through the same guard, without
	// the model.
	watcher, err := fetch.New(o.Fetch)
	if err != nil {
		return nil, fmt.Errorf("FETCH_ALLOW: %w", err)
	}
	b.Search = o.Search
	if err := fetch.RegisterSearch(registry, o.Search); err != nil {
		return nil, err
	}
	execStatus, err := a.buildExec(ctx, registry)
	if err != nil {
		return nil, err
	}
	b.Metrics = o.Metrics
	b.Metrics.Source, b.Metrics.Runs, b.Metrics.Logger = a.store, a.store, log
	a.meter = metrics.New(b.Metrics)
	b.MCP = o.MCP
	a.mcp = mcp.New(o.MCP, mcp.Options{Logger: log, Registry: registry, Observe: a.meter.MCPCallObserved})
	b.Context = o.Context
	b.Context.Store, b.Context.Context, b.Context.Workspace, b.Context.Tokenizer = a.store, a.store, a.spaces, tokenizer
	b.Context.Manifests, b.Context.Budgets = a.spaces, a.store
	b.Context.Window, b.Context.Logger = a.provider.ContextWindow(), log
	b.Context.HistoryRule = historyRule(registry)
	b.Context.Attachments, b.Context.Media = a.store, a.media
	if b.Context.Location == nil {
		// The owner's zone (OWNER_TIMEZONE) dates the prompt's input and
		// the summariser's transcript, as it does schedules.
		b.Context.Location = o.Schedule.Location
	}
	b.Context.Compaction.Provider, b.Context.Compaction.OnResult = a.provider, a.meter.CompactionObserved
	b.SummaryModel = o.SummaryModel
	if o.SummaryModel != "" && o.SummaryModel != o.LLM.Model {
		c := o.LLM
		c.Model = o.SummaryModel
		if b.Context.Compaction.Provider, err = llm.New(c); err != nil {
			return nil, fmt.Errorf("CONTEXT_SUMMARY_MODEL: %w", err)
		}
	}
	contextMgr := prompt.New(b.Context)
	// The context payload of spec 000 (`switchboard context`).
	a.payloads = payload.New(payload.Options{Recall: a.store, Rows: a.store, Runs: a.store, Files: a.spaces,
		Known: func(name string) bool { _, ok := o.Agent.Profiles[name]; return ok }})

	// Jobs are inserted in the caller's transaction by an insert-only
	// client; the queue that works them is built last, from the parts that
	// execute them.
	enqueuer, err := queue.NewEnqueuer(ctx, a.pool, log)
	if err != nil {
		return nil, err
	}

	// ChatService, routing replies to Telegram through the queue in the
	// reply's own transaction.
	b.Chat = o.Chat
	b.Chat.Store, b.Chat.Publisher, b.Chat.Logger, b.Chat.CountTokens = a.store, publisher, log, tokenizer.Count
	b.Telegram = o.Telegram
	if b.Telegram.Token != "" {
		router := telegram.Router{Queue: enqueuer, OwnerChats: b.Telegram.OwnerIDs}
		b.Chat.Routers = map[services.Source]services.ReplyRouter{services.SourceTelegram: router}
		b.Chat.Notifiers = []services.Notifier{router}
	}
	turns := b.Chat.Turns
	b.Chat.Turns = nil
	plainChat := chat.New(b.Chat)

	// The Telegram "typing…" indicator, which the agent runtime drives.
	observers := []services.RunObserver{a.meter}
	var typing *telegram.Typing
	if b.Telegram.Token != "" {
		every := b.Telegram.TypingEvery
		if typing, err = telegram.NewTyping(b.Telegram.Token, b.Telegram.APIURL, b.Telegram.HTTPClient, every); err != nil {
			return nil, err
		}
		a.typing = typing
		observers = []services.RunObserver{typing, a.meter}
	}

	// Schedules: the owner's controls and the fire ledger; the agent runs
	// the fires.
	b.Schedule = o.Schedule
	scheduler := schedule.New(schedule.Options{Store: a.store, Queue: enqueuer, Location: o.Schedule.Location, Limits: o.Schedule.Limits,
		Profiles: func(name string) bool { _, ok := o.Agent.Profiles[name]; return ok }, Watcher: watcher})

	// Daily budgets per kind of run, in the owner's zone; the 80 % notice
	// goes to the owner's timeline and channels.
	b.Budget = o.Budget
	if b.Budget.Prices == nil {
		b.Budget.Prices = budget.DefaultPrices
	}
	// A money budget needs a price for every model a run may call.
	models := []string{o.LLM.Model}
	for _, p := range o.Agent.Profiles {
		models = append(models, p.Model)
	}
	if err := budget.CheckPriced(b.Budget.Money, b.Budget.Prices, models...); err != nil {
		return nil, err
	}
	budgets := budget.New(budget.Options{Store: a.store, Limits: o.Budget.Limits, Money: b.Budget.Money, Prices: b.Budget.Prices,
		Location: o.Schedule.Location, Chat: plainChat, Observe: a.meter.BudgetObserved, Logger: log})

	// The agent runtime; profiles with a model of their own get a provider
	// of their own (same server and key).
	b.Agent = o.Agent
	b.Agent.Budgets = budgets
	b.Agent.Schedules, b.Agent.Fires, b.Agent.FireObserved, b.Agent.Watcher = scheduler, scheduler, a.meter.FireObserved, watcher
	b.Agent.Store, b.Agent.Chat, b.Agent.Queue, b.Agent.Publisher, b.Agent.LLM = a.store, plainChat, enqueuer, publisher, a.provider
	b.Agent.Compactions, b.Agent.Requests = enqueuer, a.store
	b.Agent.Tools, b.Agent.Tokenizer, b.Agent.Context, b.Agent.ContextStore = registry, tokenizer, contextMgr, a.store
	b.Agent.Manifests = a.spaces
	b.Agent.Observers, b.Agent.Logger, b.Agent.Catalog = observers, log, a.mcp
	b.Agent.Media, b.Agent.Exec = a.media, execStatus
	if t := media.NewTranscriber(o.Media.TranscribeURL, o.Media.TranscribeModel, o.Media.TranscribeAPIKey); t != nil {
		b.Agent.Transcriber = t
	}
	if b.Agent.Profiles, err = profileProviders(o.Agent.Profiles, o.LLM); err != nil {
		return nil, err
	}
	// The service's own secrets: never in a prompt, refused in an outbound
	// tool argument (the configuration adds its secret variables and the
	// MCP values marked secret).
	if b.Agent.Secrets == nil {
		b.Agent.Secrets = services.NewSecrets()
	}
	b.Agent.Secrets.Add(o.OwnerToken, hex.EncodeToString(tokenHash), o.LLM.APIKey, o.Telegram.Token, o.Telegram.WebhookSecret,
		o.Media.TranscribeAPIKey, hex.EncodeToString(o.Web.Metrics.ScrapeTokenHash))
	// Tool calls that last or leave, and every approval decision, go to
	// the hash-chained audit trail.
	b.Agent.Audit = a.store
	a.agent = agent.New(b.Agent)

	// Channels post through the ChatService that hands new user messages
	// to the agent (or to a test's own turn handler).
	if turns == nil {
		turns = a.agent
	}
	a.chat = plainChat.WithTurns(turns)
	b.Chat.Turns = turns

	// The Telegram channel: stores inbound messages through ChatService and
	// delivers through the queue.
	tstore := repository.NewTelegramStore(a.pool)
	desk := &telegram.Desk{Store: tstore, Chat: a.chat, Queue: enqueuer, Owners: b.Telegram.OwnerIDs, Logger: log}
	outbound := map[services.Source]services.OutboundHandler{}
	if b.Telegram.Token != "" {
		t := &b.Telegram.Options
		t.Chat, t.Store, t.Leases, t.Queue, t.Logger = a.chat, tstore, telegramLeases{tstore}, enqueuer, log
		t.Pairings = desk
		t.Media, t.Audit, t.Approvals = a.media, a.store, a.agent
		t.SendError = a.meter.TelegramSendError
		if a.bot, err = telegram.New(ctx, *t); err != nil {
			return nil, err
		}
		outbound[telegram.Channel] = a.bot.Deliver
		if len(t.OwnerIDs) == 0 {
			log.Warn("TELEGRAM_OWNER_IDS is empty: nobody on Telegram writes to the owner's timeline")
		}
	}

	// The queue's workers: agent turns and outbound deliveries.
	b.Queue = o.Queue
	b.Queue.Logger, b.Queue.Outbound, b.Queue.Fires, b.Queue.Compactions = log, outbound, a.agent, a.agent
	if a.queue, err = queue.New(ctx, a.pool, a.store, a.agent, b.Queue); err != nil {
		return nil, err
	}

	// The web server, last: it reads from everything above.
	b.Web = o.Web
	b.Web.Logger, b.Web.Chat, b.Web.Hub, b.Web.TokenHash = log, a.chat, a.hub, tokenHash
	b.Web.Approvals = a.agent
	b.Web.ToolResults = a.agent
	if b.Web.Sessions == nil {
		b.Web.Sessions = a.store
	}
	b.Web.ContextStore, b.Web.Inspector, b.Web.Tools, b.Web.Activity = a.store, a.agent, a.mcp, a.store
	b.Web.Manifests, b.Web.ContextBudgets = a.spaces, a.store
	b.Web.Blocks = workspaceBlocks{spaces: a.spaces, count: tokenizer.Count}
	b.Web.Model, b.Web.Provider, b.Web.MaxMessageBytes = a.provider.Model(), a.provider.Name(), b.Chat.MaxContentBytes
	if b.Web.MaxMessageBytes <= 0 {
		b.Web.MaxMessageBytes = chat.DefaultMaxContentBytes
	}
	b.OpenAI = o.OpenAI
	b.OpenAI.OwnerTimeline, b.OpenAI.Provider, b.OpenAI.MaxMessageBytes = b.Web.OwnerTimeline, b.Web.Provider, b.Web.MaxMessageBytes
	b.OpenAI.ModelReadsImages = b.Agent.PassImages
	b.Web.OpenAI = openai.New(openai.Deps{Logger: log, Chat: a.chat, Hub: a.hub, Runs: a.store, Media: a.media, Stopper: a.agent}, b.OpenAI)
	b.Web.Metrics.Handler, b.Web.Metrics.Requests, b.Web.Metrics.Websockets = a.meter.Handler(), a.meter, a.meter
	b.Web.Debug, b.Web.Pairings, b.Web.Schedules = a.store, desk, scheduler
	b.Web.Budgets = budgets
	b.Web.Media, b.Web.Attachments, b.Web.Audit = a.media, a.store, a.store
	if a.bot != nil && b.Telegram.Mode == "webhook" {
		b.Web.TelegramWebhook = a.bot.WebhookHandler(b.Telegram.WebhookSecret)
	}
	b.Web.Ready = a.ready
	if o.OwnerToken == "" && b.Web.Credentials == nil {
		// The stored token is read on each authentication, so `switchboard
		// token reset` takes effect at once on every instance.
		b.Web.Credentials = a.store
	}
	a.web = web.New(b.Web)
	return a, nil
}

// buildExec probes the exec sandbox when EXEC_ENABLED and registers the
// exec tool only when it works; the status says why not otherwise.
func (a *App) buildExec(ctx context.Context, registry *tools.Registry) (services.ExecStatus, error) {
	o := a.opts.Exec
	a.built.Exec = o
	if !o.Enabled {
		return services.ExecStatus{}, nil
	}
	o.Logger = a.log
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = a.opts.Workspace.Workspace
	}
	a.sandbox = sandbox.New(ctx, o.Options)
	st := services.ExecStatus{Enabled: true, Reason: a.sandbox.Reason(), Limits: a.sandbox.Limits()}
	if st.Offered() {
		return st, registry.Register(sandbox.Tool(a.sandbox, a.spaces.For))
	}
	return st, nil
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
	log, b, t := a.log, a.bot, a.built.Telegram
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

// Built returns the options each part was built with, collaborators filled
// in: what the configuration test compares with the environment.
func (a *App) Built() Options { return a.built }

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
func ownerToken(ctx context.Context, o Options, store *repository.Store) ([]byte, error) {
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
		return prompt.CompressionRule{MaxChars: t.History.MaxChars, KeepFields: t.History.KeepFields, DropFields: t.History.DropFields}, true
	}
}

// profileProviders copies profiles, giving each with a model other than
// the main one a provider of its own.
func profileProviders(in map[string]agent.Profile, main llm.Config) (map[string]agent.Profile, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]agent.Profile, len(in))
	for id, p := range in {
		if p.Model != "" && p.Model != main.Model && p.LLM == nil {
			c := main
			c.Model = p.Model
			var err error
			if p.LLM, err = llm.New(c); err != nil {
				return nil, fmt.Errorf("AGENT_PROFILES: profile %q: %w", id, err)
			}
		}
		out[id] = p
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
func (a *App) openDatabase(ctx context.Context, o Options, log *slog.Logger) error {
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
	if a.pool, err = repository.Open(ctx, WithPoolSize(a.built.DatabaseURL, a.built.PoolSize)); err != nil {
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
// (Options.FlagsByDatabase) and checks the result.
func flagsByDatabase(ctx context.Context, o Options, store *repository.Store) (Options, error) {
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
	poster := chat.New(chat.Options{Store: repository.New(pool), Publisher: notifier, Logger: log})
	done = func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		notifier.Flush(flush)
	}
	return &telegram.Desk{Store: repository.NewTelegramStore(pool), Chat: poster, Queue: enq, Owners: owners, Logger: log}, done, nil
}
