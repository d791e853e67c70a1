package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/channels/openai"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/chat"
	"github.com/switchboard/switchboard/services/fetch"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/sandbox"
	"github.com/switchboard/switchboard/services/schedule"
	"github.com/switchboard/switchboard/services/tools"
	"github.com/switchboard/switchboard/web"
)

// Config is the only place the environment becomes the parts' Configs: one
// method per part. Each returns settings only; app.New gives each part its
// collaborators.

// AppConfig is the whole instance's configuration on the database at dbURL.
func (c *Config) AppConfig(dbURL string, log *slog.Logger, stdout io.Writer) app.Config {
	return app.Config{
		DatabaseURL: dbURL,
		PoolSize:    c.PoolSize(),
		// WRITE and READ unset: what the database is decides them.
		FlagsByDatabase: c.FlagsByDatabase,
		Logger:          log,
		Stdout:          stdout,
		OwnerToken:      c.WebAuthToken,
		PublicURL:       c.PublicURL,
		WorkspaceDir:    filepath.Join(c.DataDir, "workspaces"),
		Workspace:       c.WorkspaceOptions(),
		LLM:             c.LLMOptions(),
		Chat:            c.ChatConfig(),
		Context:         c.ContextConfig(),
		SummaryModel:    c.ContextSummaryModel,
		Budget:          app.BudgetOptions{Limits: c.BudgetDailyTokens, Money: c.BudgetDailyUSD, Prices: c.LLMPrices},
		Agent:           c.AgentConfig(),
		Queue:           c.QueueOptions(),
		Web:             c.WebConfig(),
		Telegram:        c.TelegramConfig(),
		MCP:             c.MCPServers,
		Schedule:        c.ScheduleOptions(),
		Fetch:           fetch.Options{Allow: c.FetchAllow},
		Search:          fetch.SearchOptions{URL: c.SearxngURL},
		Media: app.MediaOptions{MaxBytes: c.MediaMaxBytes, TranscribeURL: c.TranscribeURL,
			TranscribeModel: c.TranscribeModel, TranscribeAPIKey: c.TranscribeAPIKey,
			TTSURL: c.TTSURL, TTSModel: c.TTSModel, TTSVoice: c.TTSVoice, TTSAPIKey: c.TTSAPIKey},
		Exec: c.ExecOptions(),
		// The OpenAI-compatible channel waits a little longer than a run may
		// take, so a run's own timeout notice reaches the client first.
		// API clients may send images when the model reads them.
		OpenAI: openai.Config{TurnTimeout: c.AgentRunTimeout + 30*time.Second, ModelReadsImages: c.LLMImages},
	}
}

// ExecOptions configure the exec tool's sandbox; a file written there is
// bounded by the workspace's bound.
func (c *Config) ExecOptions() app.ExecOptions {
	return app.ExecOptions{Enabled: c.ExecEnabled, Options: sandbox.Options{
		Timeout: c.ExecTimeout, CPUTime: c.ExecCPUTime, Concurrency: c.ExecConcurrency, MemoryBytes: c.ExecMemoryBytes,
		MaxProcs: c.ExecMaxProcs, MaxOutputBytes: c.ExecMaxOutputBytes, MaxFileBytes: c.WorkspaceMaxBytes,
	}}
}

// LLMOptions configure the model provider.
func (c *Config) LLMOptions() llm.Config {
	retries := c.LLMMaxRetries
	if retries == 0 {
		retries = -1 // LLM_MAX_RETRIES=0 is none; llm.Config's 0 is the default
	}
	return llm.Config{
		Provider: c.LLMProvider, BaseURL: c.LLMBaseURL, APIKey: c.LLMAPIKey, Model: c.LLMModel,
		ContextWindow: c.LLMContextWindow, Timeout: c.LLMTimeout, MaxRetries: retries,
	}
}

// ChatConfig configures ChatService.
func (c *Config) ChatConfig() chat.Config {
	return chat.Config{ScopedWrite: c.Flags.ScopedWrite, LogContent: c.LogContent}
}

// ContextConfig configures the context manager and its compaction (the
// window is the provider's, which app.New gives it).
func (c *Config) ContextConfig() prompt.Config {
	return prompt.Config{
		// The owner's zone dates the prompt's input and the summariser's
		// transcript, as it does schedules.
		Location:      c.OwnerTimezone,
		ScopedRead:    c.Flags.ScopedRead,
		Images:        c.LLMImages,
		HistoryTokens: c.ContextHistoryTokens,
		Compaction: prompt.CompactionConfig{KeepTurns: c.ContextKeepTurns, Trigger: c.ContextCompactAt, ScopedWrite: c.Flags.ScopedWrite,
			NoGlobal: c.Flags.NoGlobalWrite},
	}
}

// AgentConfig configures the agent runtime and its sub-agents.
func (c *Config) AgentConfig() agent.Config {
	var profiles map[string]agent.Profile
	if len(c.AgentProfiles) > 0 {
		profiles = make(map[string]agent.Profile, len(c.AgentProfiles))
		for id, p := range c.AgentProfiles {
			profiles[id] = p
		}
	}
	return agent.Config{
		Flags:            c.Flags,
		MaxSteps:         c.AgentMaxSteps,
		ToolsCore:        c.ToolsCore,
		ToolsDeferOver:   c.ToolsDeferOver,
		RunTimeout:       c.AgentRunTimeout,
		RequestRetention: c.RequestRetention,
		LogContent:       c.LogContent,
		PassImages:       c.LLMImages,
		Profiles:         profiles,
		SubAgents:        agent.SubAgentLimits{MaxConcurrent: c.SubAgentConcurrency, MaxDepth: c.SubAgentDepth, Timeout: c.SubAgentTimeout},
		Fire:             agent.FireLimits{MaxSteps: c.ScheduleMaxSteps, Timeout: c.ScheduleFireTimeout, MaxTokens: c.ScheduleMaxFireTokens},
		Policy:           c.Policy,
		ApprovalTimeout:  c.ApprovalTimeout,
		Secrets:          services.NewSecrets(append(c.secrets, c.MCPServers.SecretValues()...)...),
	}
}

// ScheduleOptions are the owner's zone and the limits of schedules.
func (c *Config) ScheduleOptions() app.ScheduleOptions {
	return app.ScheduleOptions{Location: c.OwnerTimezone, Limits: schedule.Limits{
		MinInterval: c.ScheduleMinInterval, MaxActive: c.ScheduleMaxActive, MaxFailures: c.ScheduleMaxFailures}}
}

// WorkspaceOptions bound what the agent writes in its workspaces.
func (c *Config) WorkspaceOptions() tools.WriteLimits {
	return tools.WriteLimits{PerCall: c.AgentMaxWriteBytes, PerRun: c.AgentMaxRunWriteBytes,
		Workspace: c.WorkspaceMaxBytes, RulesWritable: c.AgentRulesWritable}
}

// PoolNeeds is what holds database connections in this instance.
func (c *Config) PoolNeeds() app.PoolNeeds {
	return app.PoolNeeds{TurnWorkers: c.QueueOptions().TurnWorkers, Deliveries: c.TelegramBotToken != ""}
}

// PoolSize is DB_MAX_CONNS, else what the instance's workers need.
func (c *Config) PoolSize() int {
	if c.DBMaxConns > 0 {
		return c.DBMaxConns
	}
	return app.ServePoolSize(c.PoolNeeds())
}

// QueueOptions configure the job queue. AGENT_WORKERS=0 is an instance
// that stores messages and works no turns (the queue's TurnWorkers < 0).
func (c *Config) QueueOptions() queue.Options {
	workers := c.AgentWorkers
	if workers == 0 {
		workers = -1
	}
	return queue.Options{TurnWorkers: workers, RunTimeout: c.AgentRunTimeout}
}

// WebConfig configures the web server.
func (c *Config) WebConfig() web.Config {
	o := web.Config{
		OwnerTimeline: services.DefaultTimeline,
		SecureCookies: strings.HasPrefix(c.PublicURL, "https://"),
		Flags:         c.Flags,
		RateLimit: web.RateLimit{
			OwnerPerMinute: c.RateLimitPerMinute, OwnerBurst: c.RateLimitBurst,
			AnonPerMinute: c.RateLimitAnonPerMinute, AnonBurst: c.RateLimitAnonBurst,
		},
		Conns: web.ConnLimits{PerIP: c.HTTPMaxConnsPerIP, Total: c.HTTPMaxConns},
	}
	if c.MetricsToken != "" {
		o.ScrapeTokenHash = web.HashToken(c.MetricsToken)
	}
	return o
}

// TelegramConfig configures the Telegram channel (off without a token).
func (c *Config) TelegramConfig() app.TelegramConfig {
	o := app.TelegramConfig{Mode: c.TelegramMode, WebhookURL: c.TelegramWebhookURL, WebhookSecret: c.TelegramWebhookSecret}
	o.Token, o.APIURL, o.OwnerIDs, o.Policy = c.TelegramBotToken, c.TelegramAPIURL, c.TelegramOwnerIDs, c.TelegramPolicy
	o.AllowedIDs, o.GroupIDs, o.LogContent = c.TelegramAllowedIDs, c.TelegramGroups, c.LogContent
	return o
}

// LocalPGOptions are where the private PostgreSQL cluster lives and listens
// when DATABASE_URL is unset.
func (c *Config) LocalPGOptions() (dir string, port int) {
	return filepath.Join(c.DataDir, "postgres"), c.LocalPGPort
}
