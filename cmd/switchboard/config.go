package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/budget"
	"github.com/switchboard/switchboard/services/mcp"
	"github.com/switchboard/switchboard/services/tools"
)

// Config is every setting of the service, parsed once from the environment
// in main and passed down as plain values.
type Config struct {
	DatabaseURL string
	DataDir     string
	LocalPGPort int
	HTTPAddr    string
	PublicURL   string

	WebAuthToken string
	MetricsToken string

	LogFormat  string
	LogLevel   string
	LogContent bool

	Flags services.Flags
	// FlagsByDatabase: AGENT_CONTEXT_SCOPED_WRITE and _READ are unset, so
	// what the database is decides them at start (app.Config).
	FlagsByDatabase bool

	LLMProvider      string
	LLMBaseURL       string
	LLMAPIKey        string
	LLMModel         string
	LLMContextWindow int
	LLMTimeout       time.Duration
	LLMMaxRetries    int
	LLMImages        bool

	ContextKeepTurns int
	ContextCompactAt float64
	// ContextHistoryTokens is the working set (CONTEXT_HISTORY_TOKENS; -1: off).
	ContextHistoryTokens int
	ContextSummaryModel  string
	// BudgetDailyTokens are the daily token budgets per kind of run.
	BudgetDailyTokens budget.Limits
	// BudgetDailyUSD are the daily money budgets per kind of run, priced
	// by LLMPrices.
	BudgetDailyUSD budget.MoneyLimits
	LLMPrices      budget.Prices

	AgentProfiles       map[string]agent.Profile
	MCPServers          mcp.Config
	FetchAllow          []string
	SearxngURL          string
	SubAgentConcurrency int
	SubAgentDepth       int
	SubAgentTimeout     time.Duration

	AgentMaxSteps int
	// ToolsCore and ToolsDeferOver: which tools are always loaded, and
	// above how many tokens of definitions the others are deferred.
	ToolsCore       []string
	ToolsDeferOver  int
	AgentRunTimeout time.Duration
	// RequestRetention is how long each model call's exact request is kept
	// (0: none kept).
	RequestRetention time.Duration
	AgentWorkers     int
	// DBMaxConns caps the instance's connection pool (0: what it runs needs,
	// app.ServePoolSize).
	DBMaxConns int

	OwnerTimezone         *time.Location
	ScheduleMinInterval   time.Duration
	ScheduleMaxActive     int
	ScheduleMaxFailures   int
	ScheduleMaxSteps      int
	ScheduleFireTimeout   time.Duration
	ScheduleMaxFireTokens int

	AgentMaxWriteBytes    int64
	AgentMaxRunWriteBytes int64
	WorkspaceMaxBytes     int64

	ExecEnabled        bool
	ExecTimeout        time.Duration
	ExecCPUTime        time.Duration
	ExecConcurrency    int
	ExecMemoryBytes    int64
	ExecMaxProcs       int
	ExecMaxOutputBytes int64

	MediaMaxBytes      int64
	TranscribeURL      string
	TranscribeModel    string
	TranscribeAPIKey   string
	TTSURL             string
	TTSModel           string
	TTSVoice           string
	TTSAPIKey          string
	AgentRulesWritable bool

	RateLimitPerMinute     int
	RateLimitBurst         int
	RateLimitAnonPerMinute int
	RateLimitAnonBurst     int
	HTTPMaxConnsPerIP      int
	HTTPMaxConns           int

	TelegramBotToken      string
	TelegramMode          string
	TelegramWebhookURL    string
	TelegramWebhookSecret string
	TelegramAPIURL        string
	TelegramOwnerIDs      []int64
	TelegramPolicy        string
	TelegramAllowedIDs    []int64
	TelegramGroups        []int64

	Policy          *services.Policy
	ApprovalTimeout time.Duration
	// secrets are the values of the Secret variables set (the service's
	// own secrets: never in a prompt, never in an outbound argument).
	secrets []string
}

// envVar is one row of the configuration table: the README's env table and
// `switchboard --help` are generated from the same rows.
type envVar struct {
	Name    string
	Default string
	Help    string
	Secret  bool
	set     func(c *Config, v string) error
}

func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/switchboard"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "switchboard")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "switchboard")
	}
	return ".switchboard"
}

// serverZone is the server's own time zone under its IANA name when it
// can be found (TZ, /etc/timezone, the /etc/localtime link), else UTC.
func serverZone() *time.Location {
	names := []string{os.Getenv("TZ")}
	if b, err := os.ReadFile("/etc/timezone"); err == nil {
		names = append(names, strings.TrimSpace(string(b)))
	}
	if l, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(l, "zoneinfo/"); ok {
			names = append(names, name)
		}
	}
	for _, n := range names {
		if n = strings.TrimPrefix(n, ":"); n != "" {
			if loc, err := time.LoadLocation(n); err == nil {
				return loc
			}
		}
	}
	return time.UTC
}

func envTable() []envVar {
	return []envVar{
		{Name: "DATABASE_URL", Help: "PostgreSQL URL. Unset: use 127.0.0.1:5432 if it answers, else start a private cluster under DATA_DIR.", Secret: true,
			set: func(c *Config, v string) error { c.DatabaseURL = v; return nil }},
		{Name: "DATA_DIR", Default: "~/.local/share/switchboard (root: /var/lib/switchboard)", Help: "Where the private PostgreSQL cluster, the generated login token and the agent workspaces live.",
			set: func(c *Config, v string) error {
				if v == "" || strings.HasPrefix(v, "~/") {
					c.DataDir = defaultDataDir()
					return nil
				}
				c.DataDir = v
				return nil
			}},
		{Name: "DB_MAX_CONNS", Default: "0", Help: "Most PostgreSQL connections this instance opens; 0: what its workers need (2 per agent worker, outbound lane, schedule and compaction worker, plus 9). Idle ones close after 30s. Below that need start-up is refused; lower AGENT_WORKERS to fit.",
			set: func(c *Config, v string) (err error) { c.DBMaxConns, err = parseIntRange(v, 0, 10000); return }},
		{Name: "LOCAL_PG_PORT", Default: "55432", Help: "Port of the private PostgreSQL cluster started when DATABASE_URL is unset.",
			set: func(c *Config, v string) (err error) { c.LocalPGPort, err = parsePort(v); return }},
		{Name: "HTTP_ADDR", Default: "127.0.0.1:8080", Help: "Listen address of the web server (chat page, API, websocket, /healthz).",
			set: func(c *Config, v string) error {
				if _, _, err := net.SplitHostPort(v); err != nil {
					return fmt.Errorf("want host:port, got %q", v)
				}
				c.HTTPAddr = v
				return nil
			}},
		{Name: "PUBLIC_URL", Help: "URL users reach the web server at (for the printed login link). Default: http://HTTP_ADDR.",
			set: func(c *Config, v string) error {
				if v != "" && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
					return fmt.Errorf("want an http:// or https:// URL, got %q", v)
				}
				c.PublicURL = strings.TrimRight(v, "/")
				return nil
			}},
		{Name: "WEB_AUTH_TOKEN", Help: "The owner's login token for web, API and TUI. Unset: one is generated at first start, stored hashed, and printed once.", Secret: true,
			set: func(c *Config, v string) error {
				if v != "" && len(v) < 16 {
					return fmt.Errorf("too short: use at least 16 characters")
				}
				c.WebAuthToken = v
				return nil
			}},
		{Name: "METRICS_TOKEN", Help: "Bearer token a Prometheus scraper may use for GET /metrics (and nothing else). Unset: /metrics needs the owner's token.", Secret: true,
			set: func(c *Config, v string) error {
				if v != "" && len(v) < 16 {
					return fmt.Errorf("too short: use at least 16 characters")
				}
				c.MetricsToken = v
				return nil
			}},
		{Name: "LOG_FORMAT", Default: "json", Help: "Log format: json or text.",
			set: func(c *Config, v string) error { return oneOf(&c.LogFormat, v, "json", "text") }},
		{Name: "LOG_LEVEL", Default: "info", Help: "Log level: debug, info, warn or error.",
			set: func(c *Config, v string) error { return oneOf(&c.LogLevel, v, "debug", "info", "warn", "error") }},
		{Name: "LOG_CONTENT", Default: "0", Help: "Log message text (1) or never (0).",
			set: func(c *Config, v string) (err error) { c.LogContent, err = parseBool(v); return }},
		{Name: "AGENT_CONTEXT_SCOPED_WRITE", Default: "by database", Help: "Write explicit context scopes and dual-write summaries (global + main). Unset with READ unset: 1 on a database this version created, 0 on one upgraded with conversations from before scopes. See docs/ROLLOUT.md.",
			set: func(c *Config, v string) (err error) { c.Flags.ScopedWrite, err = parseFlag(v); return }},
		{Name: "AGENT_CONTEXT_SCOPED_READ", Default: "by database", Help: "Main prompts read the main scope and its summary. Requires AGENT_CONTEXT_SCOPED_WRITE=1. Unset with WRITE unset: as WRITE.",
			set: func(c *Config, v string) (err error) { c.Flags.ScopedRead, err = parseFlag(v); return }},
		{Name: "AGENT_CONTEXT_GLOBAL_WRITE", Default: "1", Help: "Keep writing the legacy global summary beside main (1), or stop once main is verified (0: one summary call per compaction instead of two; needs AGENT_CONTEXT_SCOPED_WRITE=1). See docs/ROLLOUT.md.",
			set: func(c *Config, v string) error {
				on, err := parseBool(v)
				c.Flags.NoGlobalWrite = !on
				return err
			}},
		{Name: "AGENT_SUBAGENTS", Default: "1", Help: "Run delegated tasks as sub-agents in their own scopes (needs READ=1); 0 runs them inline in main.",
			set: func(c *Config, v string) (err error) { c.Flags.SubAgents, err = parseBool(v); return }},
		{Name: "LLM_PROVIDER", Default: "offline", Help: "Model provider: openai (any OpenAI-compatible server), anthropic, or offline (answers how to configure one).",
			set: func(c *Config, v string) error { return oneOf(&c.LLMProvider, v, "offline", "openai", "anthropic") }},
		{Name: "LLM_BASE_URL", Help: "Provider base URL, e.g. http://127.0.0.1:11434/v1 for Ollama. Default: the provider's own.",
			set: func(c *Config, v string) error {
				if v != "" && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
					return fmt.Errorf("want an http:// or https:// URL, got %q", v)
				}
				c.LLMBaseURL = v
				return nil
			}},
		{Name: "LLM_API_KEY", Help: "Provider API key.", Secret: true,
			set: func(c *Config, v string) error { c.LLMAPIKey = v; return nil }},
		{Name: "LLM_MODEL", Help: "Model name, e.g. gpt-4o-mini, claude-sonnet-4-5, qwen2.5:7b.",
			set: func(c *Config, v string) error { c.LLMModel = v; return nil }},
		{Name: "LLM_CONTEXT_WINDOW", Help: "The model's context window in tokens. Default: 128000 for openai and offline, 200000 for anthropic.",
			set: func(c *Config, v string) (err error) {
				if v == "" {
					c.LLMContextWindow = 0 // the provider's default
					return nil
				}
				c.LLMContextWindow, err = parseIntRange(v, 1024, 10_000_000)
				return
			}},
		{Name: "LLM_IMAGES", Default: "0", Help: "1 if the model reads images: the owner's photos, /v1 clients' image parts and images that tools return (MCP servers) are sent as images; 0: photos and tools' images only described in text (name, size, path in the workspace), /v1 image parts refused (400).",
			set: func(c *Config, v string) (err error) { c.LLMImages, err = parseBool(v); return }},
		{Name: "LLM_TIMEOUT", Default: "120s", Help: "Timeout of one model call.",
			set: func(c *Config, v string) (err error) { c.LLMTimeout, err = parseDuration(v); return }},
		{Name: "LLM_MAX_RETRIES", Default: "2", Help: "Retries of a failed model call (429, 5xx, timeouts) before the user is told; 0 disables.",
			set: func(c *Config, v string) (err error) { c.LLMMaxRetries, err = parseIntRange(v, 0, 10); return }},
		{Name: "CONTEXT_KEEP_TURNS", Default: "10", Help: "Recent whole turns compaction never summarises.",
			set: func(c *Config, v string) (err error) { c.ContextKeepTurns, err = parseIntRange(v, 1, 1000); return }},
		{Name: "CONTEXT_HISTORY_TOKENS", Default: "12000", Help: "The working set: tokens of recent whole turns a prompt keeps above the last CONTEXT_KEEP_TURNS turns, however large the window (which stays the hard ceiling); summary segments get at most half of it. Older turns are compacted into summaries and stay reachable through recall. 0: the window alone bounds history. See docs/CONTEXT.md.",
			set: func(c *Config, v string) error {
				n, err := parseIntRange(v, 0, 10_000_000)
				if err != nil {
					return err
				}
				if n == 0 {
					n = -1
				} else if n < 500 {
					return fmt.Errorf("want 0 (off) or at least 500 tokens, got %d", n)
				}
				c.ContextHistoryTokens = n
				return nil
			}},
		{Name: "CONTEXT_SUMMARY_MODEL", Help: "The model compaction's summaries are written with, on the same provider (a cheaper one can archive). Default: LLM_MODEL.",
			set: func(c *Config, v string) error { c.ContextSummaryModel = v; return nil }},
		{Name: "CONTEXT_COMPACT_AT", Default: "0.8", Help: "Compact a scope when its history turns plus the next input reach this share of the working set (CONTEXT_HISTORY_TOKENS above the kept turns), or the last prompt plus the input reach it of the window.",
			set: func(c *Config, v string) error {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f <= 0 || f > 1 {
					return fmt.Errorf("want a number above 0 and at most 1, got %q", v)
				}
				c.ContextCompactAt = f
				return nil
			}},
		{Name: "MCP_SERVERS", Help: `MCP servers whose tools the agent gets, as JSON or the path of a JSON file, in the block MCP clients use: {"mcpServers":{"fs":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/srv/notes"]},"web":{"url":"https://…/mcp","headers":{"Authorization":"Bearer …"}}}}; per server also "allow"/"deny" (tool names), "timeout" ("60s"), "shared" (offer on every timeline, not only the owner's). Empty: none. See docs/TOOLS.md.`,
			set: func(c *Config, v string) (err error) {
				c.MCPServers, err = mcp.ParseConfig(v)
				return err
			}},
		{Name: "FETCH_ALLOW", Help: "Comma-separated addresses, CIDR ranges or host names (resolved at start) that fetch_url may reach although they are internal (loopback, private, link-local). Empty: none; public addresses only.",
			set: func(c *Config, v string) error {
				c.FetchAllow = nil
				for _, f := range strings.Split(v, ",") {
					if f = strings.TrimSpace(f); f != "" {
						c.FetchAllow = append(c.FetchAllow, f)
					}
				}
				return nil
			}},
		{Name: "SEARXNG_URL", Help: "Base URL of a SearXNG instance with its JSON API on (search.formats: json): the agent gets a web_search tool. Empty: no web_search.",
			set: func(c *Config, v string) error {
				if v != "" && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
					return fmt.Errorf("want an http(s) URL, got %q", v)
				}
				c.SearxngURL = v
				return nil
			}},
		{Name: "AGENT_PROFILES", Help: `Named sub-agent profiles as JSON: {"researcher":{"system":"…","tools":["read_file","search"],"model":"gpt-4o-mini"}}; "tools" may name a whole MCP server as "<server>__*"; "context" is the profile's context payload budgets ({"budgets":{"index_tokens":800},"top_k":{"index":10},"downgrade_order":["index","timeline","detail"]}, the rest default; docs/CONTEXT.md). Empty: one general sub-agent.`,
			set: func(c *Config, v string) error {
				if v == "" {
					return nil
				}
				var raw map[string]json.RawMessage
				if err := json.Unmarshal([]byte(v), &raw); err != nil {
					return fmt.Errorf("want a JSON object of profiles {\"name\":{\"system\":…,\"tools\":[…],\"model\":…}}: %v", err)
				}
				c.AgentProfiles = make(map[string]agent.Profile, len(raw))
				for _, id := range slices.Sorted(maps.Keys(raw)) {
					if id == "" || strings.ContainsAny(id, ": ") {
						return fmt.Errorf("profile name %q: use letters, digits, - or _", id)
					}
					p, err := decodeProfile(raw[id])
					if err != nil {
						return fmt.Errorf("profile %q: %v", id, err)
					}
					c.AgentProfiles[id] = p
				}
				return nil
			}},
		{Name: "AGENT_SUBAGENT_CONCURRENCY", Default: "4", Help: "Sub-agent runs one run may have at once.",
			set: func(c *Config, v string) (err error) { c.SubAgentConcurrency, err = parseIntRange(v, 1, 64); return }},
		{Name: "AGENT_SUBAGENT_DEPTH", Default: "1", Help: "Delegation depth: 1 lets the main agent delegate, 2 lets its sub-agents delegate too.",
			set: func(c *Config, v string) (err error) { c.SubAgentDepth, err = parseIntRange(v, 1, 5); return }},
		{Name: "AGENT_SUBAGENT_TIMEOUT", Default: "3m", Help: "Time one sub-agent run may take before it hands back a timeout.",
			set: func(c *Config, v string) (err error) { c.SubAgentTimeout, err = parseDuration(v); return }},
		{Name: "BUDGET_DAILY_TOKENS", Help: `Daily token budgets per kind of run, as JSON: {"main":200000,"subagent":100000,"schedule":50000} (the main conversation with tasks it runs inline, sub-agents, schedules' fires; a kind left out has none). A day starts at midnight in OWNER_TIMEZONE. Before each model call its estimate (prompt + largest answer) is reserved in PostgreSQL; a call that would pass the budget is not made: the run ends with BUDGET_EXCEEDED, a fire ends skipped. At 80 % the owner is told once a day. Empty: no budgets (spend still shown on /budget). See docs/OPERATIONS.md.`,
			set: func(c *Config, v string) (err error) { c.BudgetDailyTokens, err = budget.ParseLimits(v); return }},
		{Name: "BUDGET_DAILY_USD", Help: `Daily money budgets per kind of run in US dollars, as JSON: {"main":5,"subagent":2,"schedule":0.5}. Each model call reserves its most possible cost (prompt tokens at the input price + the largest answer at the output price, LLM_PRICES) and settles to its usage (cached tokens at the cached price); a call that would pass the budget is not made, as with BUDGET_DAILY_TOKENS, and both may be set. Every model the service calls (LLM_MODEL, AGENT_PROFILES' models) must have a price, or serve refuses to start. Empty: no money budgets (spend of priced models still shown on /budget).`,
			set: func(c *Config, v string) (err error) { c.BudgetDailyUSD, err = budget.ParseMoneyLimits(v); return }},
		{Name: "LLM_PRICES", Help: `Model prices in US dollars per million tokens, as JSON: {"my-model":{"input":1.0,"cached_input":0.25,"output":4.0}} (cached_input and cache_write default to input; a name ending in * matches every model it begins; a name also matches its dated snapshots, e.g. gpt-4o matches gpt-4o-2024-08-06). Added to and overriding the built-in prices of common OpenAI and Anthropic models (docs/OPERATIONS.md lists them). Used for BUDGET_DAILY_USD and the money shown on /budget.`,
			set: func(c *Config, v string) (err error) { c.LLMPrices, err = budget.ParsePrices(v); return }},
		{Name: "OWNER_TIMEZONE", Help: "The owner's IANA time zone (e.g. Europe/Berlin): schedules' times are read and shown in it unless a schedule names its own. Default: the server's zone.",
			set: func(c *Config, v string) error {
				if v == "" {
					c.OwnerTimezone = serverZone()
					return nil
				}
				loc, err := time.LoadLocation(v)
				if err != nil {
					return fmt.Errorf("unknown time zone %q; use an IANA name such as Europe/Berlin", v)
				}
				c.OwnerTimezone = loc
				return nil
			}},
		{Name: "SCHEDULE_MIN_INTERVAL", Default: "1m", Help: "Shortest time between two fires of a schedule (every, cron); shorter schedules are refused.",
			set: func(c *Config, v string) (err error) { c.ScheduleMinInterval, err = parseDuration(v); return }},
		{Name: "SCHEDULE_MAX_ACTIVE", Default: "20", Help: "Active schedules one conversation may have.",
			set: func(c *Config, v string) (err error) { c.ScheduleMaxActive, err = parseIntRange(v, 1, 10000); return }},
		{Name: "SCHEDULE_MAX_FAILURES", Default: "3", Help: "Failed fires in a row after which a schedule pauses (the owner is told once).",
			set: func(c *Config, v string) (err error) { c.ScheduleMaxFailures, err = parseIntRange(v, 1, 100); return }},
		{Name: "SCHEDULE_MAX_STEPS", Default: "8", Help: "Model calls one fire of a schedule may make.",
			set: func(c *Config, v string) (err error) { c.ScheduleMaxSteps, err = parseIntRange(v, 1, 100); return }},
		{Name: "SCHEDULE_FIRE_TIMEOUT", Default: "5m", Help: "Time one fire may take; longer fires fail (and count towards SCHEDULE_MAX_FAILURES).",
			set: func(c *Config, v string) (err error) { c.ScheduleFireTimeout, err = parseDuration(v); return }},
		{Name: "SCHEDULE_MAX_FIRE_TOKENS", Default: "60000", Help: "Tokens (prompt and completion) one fire may use before it is stopped as failed.",
			set: func(c *Config, v string) (err error) {
				c.ScheduleMaxFireTokens, err = parseIntRange(v, 1000, 10000000)
				return
			}},
		{Name: "TOOLS_CORE", Help: "Comma-separated tools every run has loaded when tools are deferred: names, or a whole MCP server as \"<server>__*\"; the others are found and loaded with find_tools. Empty: " + strings.Join(tools.DefaultCore, ",") + ", and for the main agent with sub-agents on " + strings.Join(tools.CoordinatorCore, ",") + ". See docs/TOOLS.md.",
			set: func(c *Config, v string) (err error) {
				if v != "" {
					c.ToolsCore, err = parseToolList(v)
				}
				return
			}},
		{Name: "TOOLS_DEFER_OVER", Default: "2000", Help: "Tokens of tool definitions above which the tools outside TOOLS_CORE are deferred (listed by group in the system prompt, loaded with find_tools); when every tool a run may use fits, all are sent. 0: never defer.",
			set: func(c *Config, v string) (err error) { c.ToolsDeferOver, err = parseIntRange(v, 0, 1000000); return }},
		{Name: "AGENT_MAX_STEPS", Default: "12", Help: "Model calls one run may make (tool loop limit).",
			set: func(c *Config, v string) (err error) { c.AgentMaxSteps, err = parseIntRange(v, 1, 100); return }},
		{Name: "AGENT_RUN_TIMEOUT", Default: "10m", Help: "Time one run may take before it ends as timeout.",
			set: func(c *Config, v string) (err error) { c.AgentRunTimeout, err = parseDuration(v); return }},
		{Name: "POLICY", Help: `What the agent may do without the owner's approval: JSON or the path of a JSON file applied over the default table, {"table":{"owner/tainted":{"egress":"allow"}},"tools":{"web_search":{"tainted":"allow"}},"servers":{"github":{"*":"ask"}}}. Cells: STARTER[/clean|/tainted] or clean|tainted (starters owner, stranger, schedule, subagent); effects read, workspace, persist, egress, external, destructive, exec; decisions allow, ask, deny. A stranger never gets more than read and workspace. Empty: the defaults. See docs/SECURITY.md.`,
			set: func(c *Config, v string) (err error) { c.Policy, err = services.ParsePolicy(v); return }},
		{Name: "APPROVAL_TIMEOUT", Default: "30m", Help: "How long a tool call held for the owner's approval waits; then the model is told it timed out and carries on.",
			set: func(c *Config, v string) (err error) { c.ApprovalTimeout, err = parseDuration(v); return }},
		{Name: "AGENT_REQUEST_RETENTION", Default: "168h", Help: "How long the exact request of each model call is kept (gzip-compressed; shown per run and per scope on the debug page); 0 keeps none.",
			set: func(c *Config, v string) (err error) {
				if v == "0" {
					c.RequestRetention = 0
					return nil
				}
				c.RequestRetention, err = parseDuration(v)
				return
			}},
		{Name: "AGENT_WORKERS", Default: "16", Help: "Timelines this instance answers at once (each timeline runs one main run at a time); 0: none, another instance answers.",
			set: func(c *Config, v string) (err error) { c.AgentWorkers, err = parseIntRange(v, 0, 1000); return }},
		{Name: "AGENT_MAX_WRITE_BYTES", Default: "1MiB", Help: "Bytes one write_file call may write (a number, or with KiB, MiB or GiB); larger content is refused.",
			set: func(c *Config, v string) (err error) { c.AgentMaxWriteBytes, err = parseBytes(v, 1, 1<<30); return }},
		{Name: "AGENT_MAX_RUN_WRITE_BYTES", Default: "8MiB", Help: "Bytes one run may write to the workspace in all; past it writes are refused with an error the model sees.",
			set: func(c *Config, v string) (err error) { c.AgentMaxRunWriteBytes, err = parseBytes(v, 1, 1<<40); return }},
		{Name: "WORKSPACE_MAX_BYTES", Default: "256MiB", Help: "Bytes one conversation's workspace may hold; a write that would pass it is refused.",
			set: func(c *Config, v string) (err error) { c.WorkspaceMaxBytes, err = parseBytes(v, 1, 1<<50); return }},
		{Name: "EXEC_ENABLED", Default: "1", Help: "Offer the exec tool (1): the agent runs commands and scripts over its workspace in a bubblewrap sandbox (docs/TOOLS.md). It is offered only when bwrap works (/status says why not); never unsandboxed. 0: not offered.",
			set: func(c *Config, v string) (err error) { c.ExecEnabled, err = parseBool(v); return }},
		{Name: "EXEC_TIMEOUT", Default: "60s", Help: "Wall time of one exec call; then the sandbox and every process in it are killed.",
			set: func(c *Config, v string) (err error) { c.ExecTimeout, err = parseDuration(v); return }},
		{Name: "EXEC_CPU_TIME", Default: "60s", Help: "CPU time each process in the sandbox may use (RLIMIT_CPU), whole seconds.",
			set: func(c *Config, v string) (err error) { c.ExecCPUTime, err = parseDuration(v); return }},
		{Name: "EXEC_CONCURRENCY", Default: "2", Help: "Sandboxes running at once per instance; a call waits for a free one at most its wall time.",
			set: func(c *Config, v string) (err error) { c.ExecConcurrency, err = parseIntRange(v, 1, 64); return }},
		{Name: "EXEC_MEMORY_BYTES", Default: "1GiB", Help: "Memory of one sandbox: the cgroup's bound when a memory cgroup is writable, and each process's address space (RLIMIT_AS) always.",
			set: func(c *Config, v string) (err error) { c.ExecMemoryBytes, err = parseBytes(v, 16<<20, 1<<40); return }},
		{Name: "EXEC_MAX_PROCS", Default: "64", Help: "Processes and threads of one sandbox: the cgroup's pids.max, else RLIMIT_NPROC (which counts every process of the service's user).",
			set: func(c *Config, v string) (err error) { c.ExecMaxProcs, err = parseIntRange(v, 1, 4096); return }},
		{Name: "EXEC_MAX_OUTPUT_BYTES", Default: "64KiB", Help: "Bytes of stdout and of stderr each that an exec result keeps (head and tail); a stream past 16 times this is killed.",
			set: func(c *Config, v string) (err error) {
				c.ExecMaxOutputBytes, err = parseBytes(v, 1<<10, 16<<20)
				return
			}},
		{Name: "EXEC_NETWORK", Default: "0", Help: "Network in the sandbox. Only 0 (none: a network namespace with loopback only) is supported; 1 is refused at start (docs/SECURITY.md).",
			set: func(c *Config, v string) error {
				on, err := parseBool(v)
				if err == nil && on {
					return fmt.Errorf("1 is not supported: the sandbox has no network (docs/SECURITY.md, \"The exec sandbox\")")
				}
				return err
			}},
		{Name: "MEDIA_MAX_BYTES", Default: "20MiB", Help: "Bytes one attachment may have (a photo, a document, a voice note, an upload on the web page); larger files are refused with a message naming the limit. Telegram lets bots download at most 20 MB.",
			set: func(c *Config, v string) (err error) { c.MediaMaxBytes, err = parseBytes(v, 1, 1<<32); return }},
		{Name: "TRANSCRIBE_URL", Help: "Base URL of an OpenAI-compatible speech-to-text API (POST <url>/audio/transcriptions), e.g. https://api.openai.com/v1 or a local Whisper server; voice notes and audio are transcribed and the agent answers the transcript. Empty: not transcribed.",
			set: func(c *Config, v string) error { c.TranscribeURL = strings.TrimRight(v, "/"); return nil }},
		{Name: "TRANSCRIBE_MODEL", Default: "whisper-1", Help: "Model name sent to the transcription API.",
			set: func(c *Config, v string) error { c.TranscribeModel = v; return nil }},
		{Name: "TRANSCRIBE_API_KEY", Secret: true, Help: "Bearer key of the transcription API (empty: none sent).",
			set: func(c *Config, v string) error { c.TranscribeAPIKey = v; return nil }},
		{Name: "TTS_URL", Help: "Base URL of an OpenAI-compatible text-to-speech API (POST <url>/audio/speech, OGG/Opus), e.g. https://api.openai.com/v1 or a local TTS server; a voice question on Telegram is answered with a voice note as well as the text (/voice off turns it off per chat). Empty: no spoken replies.",
			set: func(c *Config, v string) error { c.TTSURL = strings.TrimRight(v, "/"); return nil }},
		{Name: "TTS_MODEL", Default: "tts-1", Help: "Model name sent to the speech API.",
			set: func(c *Config, v string) error { c.TTSModel = v; return nil }},
		{Name: "TTS_VOICE", Default: "alloy", Help: "Voice name sent to the speech API.",
			set: func(c *Config, v string) error { c.TTSVoice = v; return nil }},
		{Name: "TTS_API_KEY", Secret: true, Help: "Bearer key of the speech API (empty: none sent).",
			set: func(c *Config, v string) error { c.TTSAPIKey = v; return nil }},
		{Name: "AGENT_RULES_WRITABLE", Default: "0", Help: "Let the agent write the rules files RULES.md and CODE_LAW.md (1); 0: it can only propose rules, which the owner approves with /rules approve N.",
			set: func(c *Config, v string) (err error) { c.AgentRulesWritable, err = parseBool(v); return }},
		{Name: "RATE_LIMIT_PER_MINUTE", Default: "600", Help: "Requests per minute the owner may make to one instance (all their clients together); over it: 429 with Retry-After. 0 disables.",
			set: func(c *Config, v string) (err error) {
				c.RateLimitPerMinute, err = parseIntRange(v, 0, 1_000_000)
				return
			}},
		{Name: "RATE_LIMIT_BURST", Default: "120", Help: "Requests the owner may make at once above the per-minute rate.",
			set: func(c *Config, v string) (err error) { c.RateLimitBurst, err = parseIntRange(v, 1, 1_000_000); return }},
		{Name: "RATE_LIMIT_ANON_PER_MINUTE", Default: "30", Help: "Requests per minute per client IP without valid credentials (login attempts, wrong tokens). 0 disables.",
			set: func(c *Config, v string) (err error) {
				c.RateLimitAnonPerMinute, err = parseIntRange(v, 0, 1_000_000)
				return
			}},
		{Name: "RATE_LIMIT_ANON_BURST", Default: "10", Help: "Requests a client without credentials may make at once above its per-minute rate.",
			set: func(c *Config, v string) (err error) {
				c.RateLimitAnonBurst, err = parseIntRange(v, 1, 1_000_000)
				return
			}},
		{Name: "HTTP_MAX_CONNS_PER_IP", Default: "64", Help: "Connections one client address may hold open at once; past it a new connection gets 503 and is closed (idle ones close after 60 s).",
			set: func(c *Config, v string) (err error) {
				c.HTTPMaxConnsPerIP, err = parseIntRange(v, 1, 1_000_000)
				return
			}},
		{Name: "HTTP_MAX_CONNS", Default: "512", Help: "Connections all clients together may hold open at once (keep it under the process's file limit).",
			set: func(c *Config, v string) (err error) { c.HTTPMaxConns, err = parseIntRange(v, 1, 1_000_000); return }},
		// Telegram variables go below this line.
		{Name: "TELEGRAM_BOT_TOKEN", Help: "Bot token from @BotFather. Unset: the Telegram channel is off. See docs/TELEGRAM.md.", Secret: true,
			set: func(c *Config, v string) error {
				if v != "" && !strings.Contains(v, ":") {
					return fmt.Errorf("want a BotFather token such as 123456:ABC-DEF…")
				}
				c.TelegramBotToken = v
				return nil
			}},
		{Name: "TELEGRAM_MODE", Default: "polling", Help: "How updates arrive: polling (one instance long-polls) or webhook (Telegram calls TELEGRAM_WEBHOOK_URL).",
			set: func(c *Config, v string) error { return oneOf(&c.TelegramMode, v, "polling", "webhook") }},
		{Name: "TELEGRAM_WEBHOOK_URL", Help: "Public https URL Telegram posts updates to, ending in /telegram/webhook. Required in webhook mode.",
			set: func(c *Config, v string) error {
				if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
					return fmt.Errorf("want an https:// URL, got %q", v)
				}
				c.TelegramWebhookURL = v
				return nil
			}},
		{Name: "TELEGRAM_WEBHOOK_SECRET", Help: "Secret Telegram sends in X-Telegram-Bot-Api-Secret-Token (1-256 of A-Z a-z 0-9 _ -). Required in webhook mode.", Secret: true,
			set: func(c *Config, v string) error {
				if len(v) > 256 || strings.TrimLeft(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
					return fmt.Errorf("want 1 to 256 characters of A-Z, a-z, 0-9, _ and -")
				}
				c.TelegramWebhookSecret = v
				return nil
			}},
		{Name: "TELEGRAM_API_URL", Default: "https://api.telegram.org", Help: "Bot API base URL (a local Bot API server or a test emulator).",
			set: func(c *Config, v string) error {
				if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
					return fmt.Errorf("want an http:// or https:// URL, got %q", v)
				}
				c.TelegramAPIURL = strings.TrimRight(v, "/")
				return nil
			}},
		{Name: "TELEGRAM_OWNER_IDS", Help: "Comma-separated Telegram user ids of the owner: their messages join the owner's timeline.",
			set: func(c *Config, v string) (err error) { c.TelegramOwnerIDs, err = parseIDList(v); return }},
		{Name: "TELEGRAM_POLICY", Default: "pairing", Help: "Other senders: pairing (they get a code the owner approves), allowlist (only TELEGRAM_ALLOWED_IDS) or open (everyone, each in their own timeline).",
			set: func(c *Config, v string) error { return oneOf(&c.TelegramPolicy, v, "pairing", "allowlist", "open") }},
		{Name: "TELEGRAM_ALLOWED_IDS", Help: "Comma-separated user ids allowed without pairing, each in their own timeline tg:<id>.",
			set: func(c *Config, v string) (err error) { c.TelegramAllowedIDs, err = parseIDList(v); return }},
		{Name: "TELEGRAM_GROUPS", Help: "Comma-separated group chat ids the bot answers in (only messages mentioning it); others are ignored.",
			set: func(c *Config, v string) (err error) { c.TelegramGroups, err = parseIDList(v); return }},
	}
}

// LoadConfig parses the environment through getenv. Every bad value is
// reported, each naming its variable.
func LoadConfig(getenv func(string) string) (*Config, error) {
	c := &Config{}
	var errs []string
	for _, v := range envTable() {
		val := strings.TrimSpace(getenv(v.Name))
		if val == "" {
			val = v.Default
		}
		if err := v.set(c, val); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", v.Name, err))
		}
		if v.Secret && val != "" {
			c.secrets = append(c.secrets, val)
		}
	}
	// With WRITE and READ unset, the database decides them when the
	// service starts (app.Config.FlagsByDatabase), and checks them then.
	c.FlagsByDatabase = strings.TrimSpace(getenv("AGENT_CONTEXT_SCOPED_WRITE")) == "" && strings.TrimSpace(getenv("AGENT_CONTEXT_SCOPED_READ")) == ""
	if !c.FlagsByDatabase {
		c.Flags.Origin = services.FlagsFromEnv
	}
	if len(errs) == 0 && !c.FlagsByDatabase {
		if err := c.Flags.Validate(); err != nil {
			errs = append(errs, services.ErrorMessage(err))
		}
	}
	if len(errs) == 0 && c.TelegramBotToken != "" && c.TelegramMode == "webhook" {
		if c.TelegramWebhookURL == "" {
			errs = append(errs, "TELEGRAM_WEBHOOK_URL: required with TELEGRAM_MODE=webhook")
		}
		if c.TelegramWebhookSecret == "" {
			errs = append(errs, "TELEGRAM_WEBHOOK_SECRET: required with TELEGRAM_MODE=webhook")
		}
	}
	if len(errs) == 0 && c.DBMaxConns > 0 {
		if need := app.ServePoolSize(c.PoolNeeds()); c.DBMaxConns < need {
			errs = append(errs, fmt.Sprintf("DB_MAX_CONNS: %d is below the %d connections this instance's workers need (AGENT_WORKERS=%d%s); lower AGENT_WORKERS or raise DB_MAX_CONNS",
				c.DBMaxConns, need, c.AgentWorkers, map[bool]string{true: ", Telegram deliveries", false: ""}[c.TelegramBotToken != ""]))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configuration:\n  %s", strings.Join(errs, "\n  "))
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.HTTPAddr
	}
	return c, nil
}

func oneOf(dst *string, v string, allowed ...string) error {
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			*dst = a
			return nil
		}
	}
	return fmt.Errorf("want one of %s, got %q", strings.Join(allowed, ", "), v)
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want 0 or 1, got %q", v)
}

// parseIDList parses comma-separated Telegram ids (negative for groups).
func parseIDList(v string) ([]int64, error) {
	var ids []int64
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("want comma-separated numeric ids, got %q", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// toolPattern is a tool name or "<server>__*".
var toolPattern = regexp.MustCompile(`^([A-Za-z0-9_-]{1,64}|[A-Za-z0-9_-]+__\*)$`)

// parseToolList reads a comma-separated list of tool names and
// "<server>__*" groups.
func parseToolList(v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !toolPattern.MatchString(f) {
			return nil, fmt.Errorf("%q is neither a tool name (letters, digits, _ and -) nor a whole MCP server as \"<server>__*\"", f)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errors.New("names no tool")
	}
	return out, nil
}

func parsePort(v string) (int, error) { return parseIntRange(v, 1, 65535) }

func parseIntRange(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("want a whole number, got %q", v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("want %d to %d, got %d", lo, hi, n)
	}
	return n, nil
}

// parseBytes parses a size: a whole number of bytes, or one with a KiB, MiB
// or GiB suffix ("8MiB"), between lo and hi bytes.
func parseBytes(v string, lo, hi int64) (int64, error) {
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > hi/mult {
		return 0, fmt.Errorf("want a size in bytes such as 1048576 or 1MiB (at most %d bytes), got %q", hi, v)
	}
	if n*mult < lo {
		return 0, fmt.Errorf("want at least %d bytes, got %q", lo, v)
	}
	return n * mult, nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 30s or 2m, got %q", v)
	}
	return d, nil
}

// parseFlag is parseBool for a rollout flag, whose default ("by database")
// reads as off here and is decided at start.
func parseFlag(v string) (bool, error) {
	if v == "by database" {
		return false, nil
	}
	return parseBool(v)
}
