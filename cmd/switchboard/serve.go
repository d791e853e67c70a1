package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/contextmgr"
	"github.com/switchboard/switchboard/services/events"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/metrics"
	"github.com/switchboard/switchboard/services/tools"
	"github.com/switchboard/switchboard/web"
)

func runServe(ctx context.Context, cfg *Config, log *slog.Logger, stdout io.Writer) error {
	started := time.Now()
	url, stopDB, err := resolveDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopDB()
	pool, err := repository.Open(ctx, withPoolSize(url, servePoolSize(cfg.AgentWorkers)))
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := repository.NewMigrator(pool)
	if err != nil {
		return err
	}
	defer migrator.Close()
	if applied, err := migrator.Up(ctx); err != nil {
		return err
	} else if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}
	store := repository.New(pool)

	tokenHash, err := ownerToken(ctx, cfg, store, stdout)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hub := events.NewHub(store, log)
	go hub.Run(ctx)
	notifier, err := repository.NewNotifier(ctx, pool, log)
	if err != nil {
		return err
	}
	publisher := events.Fanout{Hub: hub, Remote: notifier}

	// The encoding loads with the first message, not at start: it is most
	// of the idle heap and of the start time (docs/BENCHMARKS.md).
	tokenizer := contextmgr.NewLazyTokenizer(cfg.LLMModel, func(warn error) {
		log.Warn("tokenizer fell back to an estimate", "code", services.ErrorCode(warn), "err", warn)
	})
	provider, err := llm.New(llm.Config{
		Provider: cfg.LLMProvider, BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: cfg.LLMModel,
		ContextWindow: cfg.LLMContextWindow, Timeout: cfg.LLMTimeout, MaxRetries: retries(cfg.LLMMaxRetries),
	})
	if err != nil {
		return err
	}
	registry := tools.NewRegistry(log)
	workspaces := tools.NewWorkspaces(filepath.Join(cfg.DataDir, "workspaces"))
	defer workspaces.Close()
	if err := tools.RegisterWorkspaceTools(registry, workspaces.For); err != nil {
		return err
	}
	if err := agent.RegisterMemoryTool(registry, store); err != nil {
		return err
	}
	meter := metrics.New(metrics.Options{Source: store, Runs: store, Logger: log})
	contextMgr := contextmgr.New(contextmgr.Options{
		Store: store, Context: store, Workspace: workspaces, Tokenizer: tokenizer,
		Window: provider.ContextWindow(), ScopedRead: cfg.ScopedRead, Logger: log,
		HistoryRule: func(name string) (contextmgr.CompressionRule, bool) {
			t, ok := registry.Get(name)
			if !ok {
				return contextmgr.CompressionRule{}, false
			}
			return contextmgr.CompressionRule{MaxChars: t.History.MaxChars, KeepFields: t.History.KeepFields, DropFields: t.History.DropFields}, true
		},
		Compaction: contextmgr.CompactionOptions{Provider: provider, KeepTurns: cfg.ContextKeepTurns,
			Trigger: cfg.ContextCompactAt, ScopedWrite: cfg.ScopedWrite, OnResult: meter.CompactionObserved},
	})
	// Profiles with a model of their own get a provider of their own (same
	// server and key).
	profiles := map[string]agent.Profile{}
	for id, p := range cfg.AgentProfiles {
		if p.Model != "" && p.Model != cfg.LLMModel {
			if p.LLM, err = llm.New(llm.Config{Provider: cfg.LLMProvider, BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: p.Model,
				ContextWindow: cfg.LLMContextWindow, Timeout: cfg.LLMTimeout, MaxRetries: retries(cfg.LLMMaxRetries)}); err != nil {
				return fmt.Errorf("AGENT_PROFILES: profile %q: %w", id, err)
			}
		}
		profiles[id] = p
	}
	tg := &telegramLink{}
	chatSvc := chat.New(chat.Options{
		Routers:     tg.Routers(cfg),
		Store:       store,
		Publisher:   publisher,
		Logger:      log,
		CountTokens: tokenizer.Count,
		ScopedWrite: cfg.ScopedWrite,
		LogContent:  cfg.LogContent,
	})
	agentSvc := agent.New(agent.Options{
		Store:        store,
		Chat:         chatSvc,
		Publisher:    publisher,
		LLM:          provider,
		Tools:        registry,
		Tokenizer:    tokenizer,
		Context:      contextMgr,
		ContextStore: store,
		Observers:    []services.RunObserver{tg, meter},
		Logger:       log,
		Flags:        agent.Flags{ScopedWrite: cfg.ScopedWrite, ScopedRead: cfg.ScopedRead, SubAgents: cfg.SubAgents},
		MaxSteps:     cfg.AgentMaxSteps,
		RunTimeout:   cfg.AgentRunTimeout,
		LogContent:   cfg.LogContent,
	})
	jobs, err := queue.New(ctx, pool, store, agentSvc, queue.Options{Logger: log, TurnWorkers: cfg.AgentWorkers, RunTimeout: cfg.AgentRunTimeout})
	if err != nil {
		return err
	}
	agentSvc.SetQueue(jobs)
	chatSvc.SetTurnHandler(agentSvc)
	// Events from every instance: /stop reaches the instance running the run.
	go notifier.Listen(ctx, func(e services.Event) {
		if e.Type == agent.EventCancel {
			agentSvc.CancelRun(e.RunID)
			return
		}
		hub.Notify(e)
	}, hub.Resync)
	srv := web.New(web.Options{
		Logger:        log,
		Chat:          chatSvc,
		Hub:           hub,
		TokenHash:     tokenHash,
		Credentials:   ownerCredentials(cfg, store),
		Conns:         web.ConnLimits{PerIP: cfg.HTTPMaxConnsPerIP, Total: cfg.HTTPMaxConns},
		Sessions:      store,
		OwnerTimeline: services.DefaultTimeline,
		SecureCookies: strings.HasPrefix(cfg.PublicURL, "https://"),
		Flags:         flagMap(cfg),
		ContextStore:  store,
		Inspector:     agentSvc,
		// The OpenAI-compatible channel waits a little longer than a run may
		// take, so a run's own timeout notice reaches the client first.
		Runs:           store,
		APITurnTimeout: cfg.AgentRunTimeout + 30*time.Second,
		RateLimit: web.RateLimit{
			OwnerPerMinute: cfg.RateLimitPerMinute, OwnerBurst: cfg.RateLimitBurst,
			AnonPerMinute: cfg.RateLimitAnonPerMinute, AnonBurst: cfg.RateLimitAnonBurst,
		},
		Ready: func(ctx context.Context) error {
			if err := pool.Ping(ctx); err != nil {
				return errors.New("database unreachable")
			}
			if pending, err := migrator.Pending(ctx); err != nil || pending {
				return errors.New("migrations not current")
			}
			return nil
		},
	})
	meter.SetWebsocketClients(srv.WebsocketClients)
	srv.SetMetrics(web.Metrics{Handler: meter.Handler(), ScrapeTokenHash: metricsTokenHash(cfg), Requests: meter})
	srv.SetDebug(debugSource{store})
	// Telegram registers its outbound handler and webhook before the queue
	// starts working deliveries.
	stopTelegram, err := startTelegram(ctx, cfg, telegramDeps{Pool: pool, Chat: chatSvc, Queue: jobs, Web: srv, Link: tg, Logger: log, SendError: meter.TelegramSendError})
	if err != nil {
		return err
	}
	defer stopTelegram()
	if err := jobs.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancelStop := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelStop()
		_ = jobs.Stop(stopCtx)
	}()

	l, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: listen on %s: %w", cfg.HTTPAddr, err)
	}
	log.Info("switchboard serving", "addr", l.Addr().String(), "flags", cfg.FlagMode(),
		"llm_provider", cfg.LLMProvider, "startup_ms", time.Since(started).Milliseconds())
	fmt.Fprintf(stdout, "Switchboard is listening on http://%s (flags: %s, model: %s)\n", l.Addr(), cfg.FlagMode(), cfg.LLMProvider)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShutdown()
	log.Info("shutting down")
	return srv.Shutdown(shutdownCtx)
}

// ownerToken returns the hash of the owner's login token: WEB_AUTH_TOKEN's,
// or a stored one, or a new one generated, stored (hashed) and printed once.
func ownerToken(ctx context.Context, cfg *Config, store *repository.Store, stdout io.Writer) ([]byte, error) {
	if cfg.WebAuthToken != "" {
		return web.HashToken(cfg.WebAuthToken), nil
	}
	tok := web.NewToken()
	hash, created, err := store.InitOwnerTokenHash(ctx, web.HashToken(tok))
	if err != nil {
		return nil, err
	}
	if created {
		fmt.Fprintf(stdout, "\nOwner login token generated (shown once; only its hash is stored):\n  %s\nLog in at:\n  %s/login?token=%s\n\n", tok, cfg.PublicURL, tok)
	}
	return hash, nil
}

// ownerCredentials is where the server reads the owner's token on each
// authentication: the database (so `switchboard token reset` takes effect at
// once on every instance), unless WEB_AUTH_TOKEN fixes it.
func ownerCredentials(cfg *Config, store *repository.Store) web.OwnerCredentials {
	if cfg.WebAuthToken != "" {
		return nil
	}
	return store
}

func flagMap(cfg *Config) map[string]string {
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	return map[string]string{
		"AGENT_CONTEXT_SCOPED_WRITE": b(cfg.ScopedWrite),
		"AGENT_CONTEXT_SCOPED_READ":  b(cfg.ScopedRead),
		"AGENT_SUBAGENTS":            b(cfg.SubAgents),
		"mode":                       cfg.FlagMode(),
	}
}

// servePoolSize is the connection pool serve needs: each agent worker holds
// one connection for its timeline's run lock while the run's queries use
// another, plus the queue, the LISTEN connection and web requests. pgxpool's
// default (max(4, CPUs)) deadlocks as soon as 4 timelines run at once on a
// 2-core machine: every connection holds a lock and waits for a second one.
func servePoolSize(workers int) int { return 2*workers + 10 }

// withPoolSize sets pool_max_conns on a DATABASE_URL (URL or key=value form)
// unless the operator set it.
func withPoolSize(dsn string, n int) string {
	if strings.Contains(dsn, "pool_max_conns") {
		return dsn
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "pool_max_conns=" + strconv.Itoa(n)
	}
	return strings.TrimSpace(dsn) + " pool_max_conns=" + strconv.Itoa(n)
}

// retries maps LLM_MAX_RETRIES (0 = none) to llm.Config (0 = default, <0 = none).
func retries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
