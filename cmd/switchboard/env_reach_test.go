package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// TestEveryVariableReachesTheApp sets every variable of the env table (the
// one README and --help are made from) to a valid non-default value, builds
// the app as serve does (without serving) and checks each value arrived in
// the part it configures. A variable without a row fails the test.
func TestEveryVariableReachesTheApp(t *testing.T) {
	t.Parallel()
	_, schema := dbtest.Schema(t)
	dbURL := apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema))
	dataDir := t.TempDir()
	tgAPI := httptest.NewServer(http.NotFoundHandler()) // getMe fails: a warning only
	t.Cleanup(tgAPI.Close)
	const ownerToken, metricsToken = "owner-token-0123456789", "metrics-token-0123456789"

	type check func(cfg *Config, a *app.App, b app.Config) error
	want := func(what string, got, w any) error {
		if fmt.Sprint(got) != fmt.Sprint(w) {
			return fmt.Errorf("%s = %v, want %v", what, got, w)
		}
		return nil
	}
	all := func(errs ...error) error {
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
		return nil
	}
	status := func(a *app.App, method, path, token string) int {
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	rows := map[string]struct {
		value string
		check check
	}{
		"DATABASE_URL": {dbURL, func(_ *Config, a *app.App, b app.Config) error {
			var got string
			if err := a.Pool().QueryRow(context.Background(), `SELECT current_schema()`).Scan(&got); err != nil {
				return err
			}
			return want("the app's schema", got, schema)
		}},
		"DATA_DIR": {dataDir, func(cfg *Config, _ *app.App, b app.Config) error {
			dir, _ := cfg.LocalPGOptions()
			return all(want("workspace dir", b.WorkspaceDir, filepath.Join(dataDir, "workspaces")), want("cluster dir", dir, filepath.Join(dataDir, "postgres")))
		}},
		"LOCAL_PG_PORT": {"55999", func(cfg *Config, _ *app.App, _ app.Config) error {
			_, port := cfg.LocalPGOptions()
			return want("cluster port", port, 55999)
		}},
		"HTTP_ADDR": {"127.0.0.1:18081", func(cfg *Config, _ *app.App, _ app.Config) error {
			return want("listen address", cfg.HTTPAddr, "127.0.0.1:18081")
		}},
		"PUBLIC_URL": {"https://sb.example.org", func(_ *Config, _ *app.App, b app.Config) error {
			return all(want("public URL", b.PublicURL, "https://sb.example.org"), want("secure cookies", b.Web.SecureCookies, true))
		}},
		"WEB_AUTH_TOKEN": {ownerToken, func(_ *Config, a *app.App, _ app.Config) error {
			return want("GET /api/whoami with the token", status(a, "GET", "/api/whoami", ownerToken), 200)
		}},
		"METRICS_TOKEN": {metricsToken, func(_ *Config, a *app.App, _ app.Config) error {
			return want("GET /metrics with the scrape token", status(a, "GET", "/metrics", metricsToken), 200)
		}},
		"LOG_FORMAT": {"text", func(cfg *Config, _ *app.App, _ app.Config) error {
			var buf bytes.Buffer
			newLogger(cfg, &buf).Warn("x")
			return want("text log line", strings.HasPrefix(buf.String(), "time="), true)
		}},
		"LOG_LEVEL": {"debug", func(cfg *Config, _ *app.App, _ app.Config) error {
			return want("debug enabled", newLogger(cfg, &bytes.Buffer{}).Enabled(context.Background(), slog.LevelDebug), true)
		}},
		"LOG_CONTENT": {"1", func(_ *Config, _ *app.App, b app.Config) error {
			return want("log content (chat, agent, telegram)", []bool{b.Chat.LogContent, b.Agent.LogContent, b.Telegram.LogContent}, []bool{true, true, true})
		}},
		"AGENT_CONTEXT_SCOPED_WRITE": {"1", func(_ *Config, _ *app.App, b app.Config) error {
			return want("scoped write (chat, agent, compaction, web)", []any{b.Chat.ScopedWrite, b.Agent.Flags.ScopedWrite, b.Context.Compaction.ScopedWrite, b.Web.Flags.Map()["AGENT_CONTEXT_SCOPED_WRITE"]}, []any{true, true, true, "1"})
		}},
		"AGENT_CONTEXT_SCOPED_READ": {"1", func(_ *Config, _ *app.App, b app.Config) error {
			return want("scoped read (context, agent, web)", []any{b.Context.ScopedRead, b.Agent.Flags.ScopedRead, b.Web.Flags.Map()["AGENT_CONTEXT_SCOPED_READ"]}, []any{true, true, "1"})
		}},
		"AGENT_REQUEST_RETENTION": {"48h", func(_ *Config, _ *app.App, b app.Config) error {
			return want("request retention", b.Agent.RequestRetention, 48*time.Hour)
		}},
		"AGENT_CONTEXT_GLOBAL_WRITE": {"0", func(_ *Config, _ *app.App, b app.Config) error {
			return want("global write (compaction, agent, web)", []any{b.Context.Compaction.NoGlobal, b.Agent.Flags.NoGlobalWrite, b.Web.Flags.Map()["AGENT_CONTEXT_GLOBAL_WRITE"]}, []any{true, true, "0"})
		}},
		"AGENT_SUBAGENTS": {"0", func(_ *Config, _ *app.App, b app.Config) error {
			return want("sub-agents (agent, web)", []any{b.Agent.Flags.SubAgents, b.Web.Flags.Map()["AGENT_SUBAGENTS"]}, []any{false, "0"})
		}},
		"LLM_PROVIDER": {"openai", func(_ *Config, a *app.App, b app.Config) error {
			return all(want("provider", b.LLM.Provider, "openai"), want("provider built", a.Provider().Name(), "openai"))
		}},
		"LLM_BASE_URL": {"http://127.0.0.1:9/v1", func(_ *Config, _ *app.App, b app.Config) error {
			return want("base URL", b.LLM.BaseURL, "http://127.0.0.1:9/v1")
		}},
		"LLM_API_KEY": {"sk-test", func(_ *Config, _ *app.App, b app.Config) error { return want("API key", b.LLM.APIKey, "sk-test") }},
		"LLM_MODEL":   {"big-model", func(_ *Config, _ *app.App, b app.Config) error { return want("model", b.LLM.Model, "big-model") }},
		"LLM_CONTEXT_WINDOW": {"64000", func(_ *Config, a *app.App, b app.Config) error {
			return all(want("provider window", a.Provider().ContextWindow(), 64000), want("context manager window", a.Context().Window(), 64000))
		}},
		"LLM_TIMEOUT": {"45s", func(_ *Config, _ *app.App, b app.Config) error {
			return want("model call timeout", b.LLM.Timeout, 45*time.Second)
		}},
		"LLM_IMAGES": {"1", func(_ *Config, _ *app.App, b app.Config) error {
			if !b.Agent.PassImages || !b.Context.Images || !b.OpenAI.ModelReadsImages {
				return fmt.Errorf("the agent (%v), the prompt (%v) or the API (%v) does not pass images on", b.Agent.PassImages, b.Context.Images, b.OpenAI.ModelReadsImages)
			}
			return nil
		}},
		"MEDIA_MAX_BYTES": {"5MiB", func(_ *Config, _ *app.App, b app.Config) error {
			return want("media limit", b.Media.MaxBytes, int64(5<<20))
		}},
		"TRANSCRIBE_URL": {"http://127.0.0.1:9/v1/", func(_ *Config, a *app.App, b app.Config) error {
			if a.Transcriber() == nil {
				return fmt.Errorf("the agent has no transcriber")
			}
			return want("transcription URL", b.Media.TranscribeURL, "http://127.0.0.1:9/v1")
		}},
		"TRANSCRIBE_MODEL": {"whisper-large", func(_ *Config, _ *app.App, b app.Config) error {
			return want("transcription model", b.Media.TranscribeModel, "whisper-large")
		}},
		"TRANSCRIBE_API_KEY": {"tk-test", func(_ *Config, _ *app.App, b app.Config) error {
			return want("transcription key", b.Media.TranscribeAPIKey, "tk-test")
		}},
		"TTS_URL": {"http://127.0.0.1:9/v1/", func(_ *Config, a *app.App, b app.Config) error {
			if a.Speaker() == nil {
				return fmt.Errorf("no speaker")
			}
			return want("speech URL", b.Media.TTSURL, "http://127.0.0.1:9/v1")
		}},
		"TTS_MODEL": {"gpt-4o-mini-tts", func(_ *Config, _ *app.App, b app.Config) error {
			return want("speech model", b.Media.TTSModel, "gpt-4o-mini-tts")
		}},
		"TTS_VOICE": {"nova", func(_ *Config, _ *app.App, b app.Config) error {
			return want("speech voice", b.Media.TTSVoice, "nova")
		}},
		"TTS_API_KEY": {"sk-tts", func(_ *Config, _ *app.App, b app.Config) error {
			return want("speech key", b.Media.TTSAPIKey, "sk-tts")
		}},
		"LLM_MAX_RETRIES": {"5", func(_ *Config, _ *app.App, b app.Config) error { return want("retries", b.LLM.MaxRetries, 5) }},
		"CONTEXT_KEEP_TURNS": {"7", func(_ *Config, _ *app.App, b app.Config) error {
			return want("keep turns", b.Context.Compaction.KeepTurns, 7)
		}},
		"CONTEXT_COMPACT_AT": {"0.6", func(_ *Config, _ *app.App, b app.Config) error {
			return want("compaction trigger", b.Context.Compaction.Trigger, 0.6)
		}},
		"BUDGET_DAILY_TOKENS": {`{"main":200000,"schedule":50000}`, func(_ *Config, _ *app.App, b app.Config) error {
			return all(want("main budget", b.Budget.Limits[services.BudgetMain], 200000), want("schedule budget", b.Budget.Limits[services.BudgetSchedule], 50000))
		}},
		"BUDGET_DAILY_USD": {`{"main":5,"schedule":0.5}`, func(_ *Config, _ *app.App, b app.Config) error {
			return all(want("main money budget", b.Budget.Money[services.BudgetMain], services.MoneyFromUSD(5)), want("schedule money budget", b.Budget.Money[services.BudgetSchedule], services.MoneyFromUSD(0.5)))
		}},
		// Every model the service calls has a price (big-model, the
		// profile's small, the summary model): else a money budget refuses
		// to start.
		"LLM_PRICES": {`{"big-model":{"input":3,"cached_input":0.3,"output":15},"small*":{"input":0.1,"output":0.4},"gpt-4o-mini-summary":{"input":0.15,"output":0.6}}`, func(_ *Config, _ *app.App, b app.Config) error {
			big, ok1 := b.Budget.Prices.Lookup("big-model")
			small, ok2 := b.Budget.Prices.Lookup("small")
			def, ok3 := b.Budget.Prices.Lookup("gpt-4o-mini-2024-07-18")
			return all(want("big-model's price", fmt.Sprint(ok1, big.Output, big.CachedInput), "true 15 0.3"),
				want("small's price", fmt.Sprint(ok2, small.CachedInput), "true 0.1"), want("a default price", fmt.Sprint(ok3, def.Input), "true 0.15"))
		}},
		"CONTEXT_HISTORY_TOKENS": {"6000", func(_ *Config, _ *app.App, b app.Config) error {
			return want("working set", b.Context.HistoryTokens, 6000)
		}},
		"CONTEXT_SUMMARY_MODEL": {"gpt-4o-mini-summary", func(_ *Config, a *app.App, b app.Config) error {
			return all(want("summary model", b.SummaryModel, "gpt-4o-mini-summary"), want("summariser's model", a.Summariser().Model(), "gpt-4o-mini-summary"))
		}},
		"MCP_SERVERS": {`{"mcpServers":{"notes":{"command":"/nonexistent/mcp-server","timeout":"5s"}}}`, func(_ *Config, a *app.App, b app.Config) error {
			c, ok := b.MCP["notes"]
			if !ok || c.Command != "/nonexistent/mcp-server" || time.Duration(c.Timeout) != 5*time.Second {
				return fmt.Errorf("MCP servers = %+v, want notes with its command and a 5s timeout", b.MCP)
			}
			if _, servers := a.Tools().ToolCatalog(); len(servers) != 1 || servers[0].Name != "notes" {
				return fmt.Errorf("the app's tool catalog lists servers %+v, want notes", servers)
			}
			return nil
		}},
		"FETCH_ALLOW": {"127.0.0.1, 10.0.0.0/8", func(_ *Config, a *app.App, b app.Config) error {
			if !slices.Equal(b.Fetch.Allow, []string{"127.0.0.1", "10.0.0.0/8"}) {
				return fmt.Errorf("fetch allow list = %v", b.Fetch.Allow)
			}
			return nil
		}},
		"SEARXNG_URL": {"http://127.0.0.1:8888", func(_ *Config, a *app.App, b app.Config) error {
			if b.Search.URL != "http://127.0.0.1:8888" {
				return fmt.Errorf("search URL = %q", b.Search.URL)
			}
			tools, _ := a.Tools().ToolCatalog()
			for _, t := range tools {
				if t.Name == "web_search" {
					return nil
				}
			}
			return fmt.Errorf("the agent has no web_search tool")
		}},
		"AGENT_PROFILES": {`{"researcher":{"system":"Find facts.","tools":["search"],"model":"small"}}`, func(_ *Config, a *app.App, b app.Config) error {
			p, ok := b.Agent.Profiles["researcher"]
			if !ok || p.SystemPrompt != "Find facts." || !slices.Equal(p.Tools, []string{"search"}) || p.Model != "small" {
				return fmt.Errorf("agent profiles = %+v, want researcher with model small", b.Agent.Profiles)
			}
			if p := a.ProfileLLMs()["researcher"]; p == nil || p.Model() != "small" {
				return fmt.Errorf("the app's profile providers = %+v, want researcher with its own provider for model small", a.ProfileLLMs())
			}
			return nil
		}},
		"AGENT_SUBAGENT_CONCURRENCY": {"3", func(_ *Config, _ *app.App, b app.Config) error {
			return want("sub-agent concurrency", b.Agent.SubAgents.MaxConcurrent, 3)
		}},
		"POLICY": {`{"tools":{"web_search":{"tainted":"allow"}}}`, func(_ *Config, _ *app.App, b app.Config) error {
			k := services.PolicyKey{Starter: services.StarterOwner, Tainted: true}
			return all(want("web_search when tainted", b.Agent.Policy.Decide(k, services.EffectEgress, "web_search", ""), services.Allow),
				want("fetch_url when tainted (default)", b.Agent.Policy.Decide(k, services.EffectEgress, "fetch_url", ""), services.Ask))
		}},
		"APPROVAL_TIMEOUT": {"5m", func(_ *Config, _ *app.App, b app.Config) error {
			return want("approval timeout", b.Agent.ApprovalTimeout, 5*time.Minute)
		}},
		"TOOLS_CORE": {"read_file, fs__*", func(_ *Config, _ *app.App, b app.Config) error {
			return want("core tools", b.Agent.ToolsCore, []string{"read_file", "fs__*"})
		}},
		"TOOLS_DEFER_OVER": {"3000", func(_ *Config, _ *app.App, b app.Config) error {
			return want("defer over", b.Agent.ToolsDeferOver, 3000)
		}},
		"AGENT_SUBAGENT_DEPTH": {"2", func(_ *Config, _ *app.App, b app.Config) error {
			return want("sub-agent depth", b.Agent.SubAgents.MaxDepth, 2)
		}},
		"AGENT_SUBAGENT_TIMEOUT": {"90s", func(_ *Config, _ *app.App, b app.Config) error {
			return want("sub-agent timeout", b.Agent.SubAgents.Timeout, 90*time.Second)
		}},
		"OWNER_TIMEZONE": {"Asia/Tokyo", func(_ *Config, _ *app.App, b app.Config) error {
			if err := want("owner zone", b.Schedule.Location, "Asia/Tokyo"); err != nil {
				return err
			}
			return want("prompt zone", b.Context.Location, "Asia/Tokyo")
		}},
		"SCHEDULE_MIN_INTERVAL": {"5m", func(_ *Config, _ *app.App, b app.Config) error {
			return want("min interval", b.Schedule.Limits.MinInterval, 5*time.Minute)
		}},
		"SCHEDULE_MAX_ACTIVE": {"7", func(_ *Config, _ *app.App, b app.Config) error {
			return want("max active", b.Schedule.Limits.MaxActive, 7)
		}},
		"SCHEDULE_MAX_FAILURES": {"5", func(_ *Config, _ *app.App, b app.Config) error {
			return want("max failures", b.Schedule.Limits.MaxFailures, 5)
		}},
		"SCHEDULE_MAX_STEPS": {"4", func(_ *Config, _ *app.App, b app.Config) error { return want("fire steps", b.Agent.Fire.MaxSteps, 4) }},
		"SCHEDULE_FIRE_TIMEOUT": {"90s", func(_ *Config, _ *app.App, b app.Config) error {
			return want("fire timeout", b.Agent.Fire.Timeout, 90*time.Second)
		}},
		"SCHEDULE_MAX_FIRE_TOKENS": {"12345", func(_ *Config, _ *app.App, b app.Config) error {
			return want("fire tokens", b.Agent.Fire.MaxTokens, 12345)
		}},
		"AGENT_MAX_STEPS": {"20", func(_ *Config, _ *app.App, b app.Config) error { return want("max steps", b.Agent.MaxSteps, 20) }},
		"AGENT_RUN_TIMEOUT": {"5m", func(_ *Config, _ *app.App, b app.Config) error {
			return want("run timeout (agent, queue, API wait)", []time.Duration{b.Agent.RunTimeout, b.Queue.RunTimeout, b.OpenAI.TurnTimeout},
				[]time.Duration{5 * time.Minute, 5 * time.Minute, 5*time.Minute + 30*time.Second})
		}},
		"AGENT_WORKERS": {"5", func(c *Config, a *app.App, b app.Config) error {
			return all(want("turn workers", b.Queue.TurnWorkers, 5), want("pool needs", c.PoolNeeds().TurnWorkers, 5),
				want("pool size with DB_MAX_CONNS set", a.Pool().Config().MaxConns, int32(c.PoolSize())))
		}},
		"DB_MAX_CONNS": {"80", func(_ *Config, a *app.App, b app.Config) error {
			return all(want("pool size option", b.PoolSize, 80), want("pool size", a.Pool().Config().MaxConns, int32(80)))
		}},
		"AGENT_MAX_WRITE_BYTES": {"64KiB", func(_ *Config, _ *app.App, b app.Config) error {
			return want("bytes per write", b.Workspace.PerCall, 64<<10)
		}},
		"AGENT_MAX_RUN_WRITE_BYTES": {"3MiB", func(_ *Config, _ *app.App, b app.Config) error {
			return want("bytes per run", b.Workspace.PerRun, 3<<20)
		}},
		"WORKSPACE_MAX_BYTES": {"1073741824", func(_ *Config, _ *app.App, b app.Config) error {
			return want("bytes per workspace", b.Workspace.Workspace, 1<<30)
		}},
		"EXEC_ENABLED": {"0", func(_ *Config, a *app.App, b app.Config) error {
			_, registered := a.Registry().Get("exec")
			return all(want("exec enabled", b.Exec.Enabled, false), want("exec registered", registered, false))
		}},
		"EXEC_TIMEOUT": {"45s", func(_ *Config, _ *app.App, b app.Config) error {
			return want("exec wall time", b.Exec.Timeout, 45*time.Second)
		}},
		"EXEC_CPU_TIME": {"20s", func(_ *Config, _ *app.App, b app.Config) error {
			return want("exec CPU time", b.Exec.CPUTime, 20*time.Second)
		}},
		"EXEC_CONCURRENCY": {"3", func(_ *Config, _ *app.App, b app.Config) error {
			return want("exec concurrency", b.Exec.Concurrency, 3)
		}},
		"EXEC_MEMORY_BYTES": {"256MiB", func(_ *Config, _ *app.App, b app.Config) error {
			return want("exec memory", b.Exec.MemoryBytes, 256<<20)
		}},
		"EXEC_MAX_PROCS": {"20", func(_ *Config, _ *app.App, b app.Config) error {
			return want("exec processes", b.Exec.MaxProcs, 20)
		}},
		"EXEC_MAX_OUTPUT_BYTES": {"8KiB", func(_ *Config, _ *app.App, b app.Config) error {
			return want("exec output", b.Exec.MaxOutputBytes, 8<<10)
		}},
		"EXEC_NETWORK": {"no", func(_ *Config, _ *app.App, b app.Config) error {
			return want("exec network", b.Exec.Network, false)
		}},
		"AGENT_RULES_WRITABLE": {"1", func(_ *Config, _ *app.App, b app.Config) error {
			return want("rules files writable", b.Workspace.RulesWritable, true)
		}},
		"RATE_LIMIT_PER_MINUTE": {"100", func(_ *Config, _ *app.App, b app.Config) error {
			return want("owner rate", b.Web.RateLimit.OwnerPerMinute, 100)
		}},
		"RATE_LIMIT_BURST": {"11", func(_ *Config, _ *app.App, b app.Config) error {
			return want("owner burst", b.Web.RateLimit.OwnerBurst, 11)
		}},
		"RATE_LIMIT_ANON_PER_MINUTE": {"12", func(_ *Config, _ *app.App, b app.Config) error {
			return want("anonymous rate", b.Web.RateLimit.AnonPerMinute, 12)
		}},
		"RATE_LIMIT_ANON_BURST": {"3", func(_ *Config, _ *app.App, b app.Config) error {
			return want("anonymous burst", b.Web.RateLimit.AnonBurst, 3)
		}},
		"HTTP_MAX_CONNS_PER_IP": {"7", func(_ *Config, _ *app.App, b app.Config) error {
			return want("connections per address", b.Web.Conns.PerIP, 7)
		}},
		"HTTP_MAX_CONNS": {"99", func(_ *Config, _ *app.App, b app.Config) error {
			return want("connections in total", b.Web.Conns.Total, 99)
		}},
		"TELEGRAM_BOT_TOKEN": {"1234:test-token", func(_ *Config, a *app.App, b app.Config) error {
			return all(want("bot token", b.Telegram.Token, "1234:test-token"), want("bot built", a.Bot() != nil, true))
		}},
		"TELEGRAM_MODE": {"webhook", func(_ *Config, a *app.App, b app.Config) error {
			// The webhook route is mounted: a wrong secret is refused, not 404.
			return all(want("mode", b.Telegram.Mode, "webhook"), want("POST /telegram/webhook with no secret", status(a, "POST", "/telegram/webhook", ""), 401))
		}},
		"TELEGRAM_WEBHOOK_URL": {"https://sb.example.org/telegram/webhook", func(_ *Config, _ *app.App, b app.Config) error {
			return want("webhook URL", b.Telegram.WebhookURL, "https://sb.example.org/telegram/webhook")
		}},
		"TELEGRAM_WEBHOOK_SECRET": {"hook_secret-1", func(_ *Config, _ *app.App, b app.Config) error {
			return want("webhook secret", b.Telegram.WebhookSecret, "hook_secret-1")
		}},
		"TELEGRAM_API_URL": {tgAPI.URL, func(_ *Config, _ *app.App, b app.Config) error {
			return want("Bot API URL", b.Telegram.APIURL, tgAPI.URL)
		}},
		"TELEGRAM_OWNER_IDS": {"7, 8", func(_ *Config, _ *app.App, b app.Config) error {
			return want("owner ids", b.Telegram.OwnerIDs, []int64{7, 8})
		}},
		"TELEGRAM_POLICY": {"allowlist", func(_ *Config, _ *app.App, b app.Config) error {
			return want("policy", b.Telegram.Policy, "allowlist")
		}},
		"TELEGRAM_ALLOWED_IDS": {"9", func(_ *Config, _ *app.App, b app.Config) error {
			return want("allowed ids", b.Telegram.AllowedIDs, []int64{9})
		}},
		"TELEGRAM_GROUPS": {"-100123", func(_ *Config, _ *app.App, b app.Config) error {
			return want("groups", b.Telegram.GroupIDs, []int64{-100123})
		}},
	}

	vars := map[string]string{}
	for _, v := range envTable() {
		r, ok := rows[v.Name]
		if !ok {
			t.Errorf("%s has no row here: add one that checks it reaches the app", v.Name)
			continue
		}
		if r.value == v.Default {
			t.Errorf("%s: the test value %q is the default", v.Name, r.value)
		}
		vars[v.Name] = r.value
	}
	for name := range rows {
		if _, ok := vars[name]; !ok {
			t.Errorf("row %s is not in the env table", name)
		}
	}
	cfg, err := LoadConfig(env(vars))
	if err != nil {
		t.Fatal(err)
	}
	// The check compares the configuration the app is built from, part by
	// part, and what the app built from it.
	b := cfg.AppConfig(cfg.DatabaseURL, slog.New(slog.DiscardHandler), &bytes.Buffer{})
	a, err := app.New(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	for _, v := range envTable() {
		if r, ok := rows[v.Name]; ok {
			if err := r.check(cfg, a, b); err != nil {
				t.Errorf("%s=%s did not reach the app: %v", v.Name, r.value, err)
			}
		}
	}
}
