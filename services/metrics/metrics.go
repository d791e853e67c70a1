// Package metrics is Switchboard's Prometheus instrumentation. It counts what
// this process does (runs it finished, requests it answered, compactions and
// Telegram send errors its callers report) and, at scrape time, reads what
// every instance shares from the database through a Source (messages by
// channel, queue depth, unfinished runs), so those gauges agree across
// instances.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard/switchboard/services"
)

// Snapshot is the database-wide state read at scrape time.
type Snapshot struct {
	// MessagesByChannel counts visible timeline messages by source (channel).
	MessagesByChannel map[string]int64
	// QueueJobs counts durable jobs not yet finalized, by queue and state.
	QueueJobs []QueueJobs
	// UnfinishedRuns counts runs without finished_at by status.
	UnfinishedRuns map[string]int64
	// OldestUnfinishedRun is the age of the longest-open run (0: none).
	OldestUnfinishedRun time.Duration
}

// QueueJobs is the number of jobs of one queue in one state.
type QueueJobs struct {
	Queue string
	State string
	Jobs  int64
}

// Source reads a Snapshot. Implementations keep it cheap: it runs on every
// scrape (at most once per Options.CacheFor).
type Source interface {
	// MetricsSnapshot returns the current shared state; EUNAVAILABLE when
	// the database cannot be reached.
	MetricsSnapshot(ctx context.Context) (Snapshot, error)
}

// RunGetter reads a run as stored (RunObserver hears the run as it started).
type RunGetter interface {
	// GetRun returns one run; ENOTFOUND when absent.
	GetRun(ctx context.Context, id int64) (services.Run, error)
}

// Options configures Metrics.
type Options struct {
	// Source feeds the database gauges; nil leaves them out.
	Source Source
	// Runs re-reads a finished run for its status, duration and tokens; nil
	// counts only runs started.
	Runs RunGetter
	// Logger reports scrape-time failures.
	Logger *slog.Logger
	// CacheFor reuses a Snapshot for this long, so several scrapers (or a
	// scrape storm) cost one query set. Default 5s.
	CacheFor time.Duration
	// ScrapeTimeout bounds reading a Snapshot. Default 3s.
	ScrapeTimeout time.Duration
}

// Metrics holds every collector. It is a services.RunObserver; its other
// methods are hooks for the code that sees the event (compactions in the
// ContextManager, send errors in the Telegram outbound handler, requests in
// the web server).
type Metrics struct {
	opts     Options
	log      *slog.Logger
	registry *prometheus.Registry

	runsStarted      prometheus.Counter
	runsFinished     *prometheus.CounterVec
	runDuration      *prometheus.HistogramVec
	runsActive       prometheus.Gauge
	promptTokens     prometheus.Counter
	completionTokens prometheus.Counter
	cachedTokens     prometheus.Counter
	estimatedTokens  prometheus.Counter
	budgetUse        prometheus.Histogram
	handoffs         *prometheus.CounterVec
	compactions      *prometheus.CounterVec
	fires            *prometheus.CounterVec
	budgetTokens     *prometheus.CounterVec
	budgetRefused    *prometheus.CounterVec
	budgetCost       *prometheus.CounterVec
	telegramErrors   *prometheus.CounterVec
	mcpCalls         *prometheus.CounterVec
	mcpDuration      *prometheus.HistogramVec
	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec

	wsClients prometheus.Gauge
	active    sync.Map // run id → struct{}: runs this process saw start
}

var _ services.RunObserver = (*Metrics)(nil)

// New registers every collector on a fresh registry (plus the Go runtime
// and process collectors).
func New(opts Options) *Metrics {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CacheFor <= 0 {
		opts.CacheFor = 5 * time.Second
	}
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 3 * time.Second
	}
	m := &Metrics{opts: opts, log: opts.Logger, registry: prometheus.NewRegistry()}
	f := factory{m.registry}
	m.runsStarted = f.counter("switchboard_runs_started_total", "Agent runs this instance started executing.")
	m.runsFinished = f.counterVec("switchboard_runs_finished_total", "Agent runs this instance finished, by final status (ok, error, timeout, cancelled, interrupted).", "status")
	m.runDuration = f.histogramVec("switchboard_run_duration_seconds", "Wall time of finished agent runs, by final status.",
		[]float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, "status")
	m.runsActive = f.gauge("switchboard_runs_active", "Agent runs executing in this instance now.")
	m.promptTokens = f.counter("switchboard_prompt_tokens_total", "Prompt tokens reported by the model provider, summed over every model call of finished runs (cached ones included).")
	m.completionTokens = f.counter("switchboard_completion_tokens_total", "Completion tokens reported by the model provider for finished runs.")
	m.cachedTokens = f.counter("switchboard_cached_prompt_tokens_total", "Prompt tokens the provider read from its prompt cache (cache hits) for finished runs.")
	m.estimatedTokens = f.counter("switchboard_prompt_estimated_tokens_total", "Tokens of the first prompt of finished runs as the ContextManager estimated them.")
	m.budgetUse = f.histogram("switchboard_prompt_budget_use_ratio", "Estimated prompt tokens divided by the prompt token budget, per finished run.",
		[]float64{0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1, 1.1})
	m.handoffs = f.counterVec("switchboard_handoffs_total", "Sub-agent runs (parent_run_id set) that ended and handed back to their parent, by status.", "status")
	m.fires = f.counterVec("switchboard_schedule_fires_total", "Fires of schedules, by result: ok (nothing told), notified, error, interrupted.", "result")
	m.budgetTokens = f.counterVec("switchboard_budget_tokens_total", "Tokens of model calls settled against the daily budgets (provider-reported usage, estimated when none), by kind of run: main, subagent, schedule.", "kind")
	m.budgetCost = f.counterVec("switchboard_budget_cost_usd_total", "US dollars of model calls settled against the daily budgets (usage at the model's LLM_PRICES price; models without a price count nothing), by kind of run.", "kind")
	m.budgetRefused = f.counterVec("switchboard_budget_refused_total", "Model calls a daily budget refused (BUDGET_EXCEEDED), by kind of run.", "kind")
	m.compactions = f.counterVec("switchboard_compactions_total", "Context compactions per scope, by result: ok (cursor moved), skipped, free_form (summary kept as written), failed.", "result")
	m.telegramErrors = f.counterVec("switchboard_telegram_send_errors_total", "Failed Telegram Bot API sends, by error code (HTTP/Bot API code, or network).", "code")
	m.mcpCalls = f.counterVec("switchboard_mcp_calls_total", "Calls to MCP servers' tools, by server and result (ok, or the error code such as tool_timeout, mcp_server_down, mcp_tool_error).", "server", "result")
	m.mcpDuration = f.histogramVec("switchboard_mcp_call_duration_seconds", "Duration of calls to MCP servers' tools, by server.",
		[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}, "server")
	m.httpRequests = f.counterVec("switchboard_http_requests_total", "HTTP requests answered, by method, route pattern and status code.", "method", "route", "code")
	m.httpDuration = f.histogramVec("switchboard_http_request_duration_seconds", "HTTP request duration by route pattern (websockets last as long as the connection).",
		prometheus.DefBuckets, "route")
	m.wsClients = f.gauge("switchboard_websocket_clients", "Open websocket connections (web page, TUI) on this instance.")
	if opts.Source != nil {
		m.registry.MustRegister(&dbCollector{m: m})
	}
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition format. It does
// no authentication: the web server mounts it behind its own check.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorLog: slogPromLogger{m.log}, ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the registry the collectors live on (tests, extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// WebsocketOpened counts a websocket the web server accepted.
func (m *Metrics) WebsocketOpened() { m.wsClients.Inc() }

// WebsocketClosed counts a websocket that ended.
func (m *Metrics) WebsocketClosed() { m.wsClients.Dec() }

// RunStarted counts a run this instance starts executing.
func (m *Metrics) RunStarted(ctx context.Context, run services.Run, trigger services.Message) {
	m.runsStarted.Inc()
	if _, loaded := m.active.LoadOrStore(run.ID, struct{}{}); !loaded {
		m.runsActive.Inc()
	}
}

// RunFinished counts a finished run by status with its duration and token
// use, and a handoff when it is a sub-agent run. A run passed in still
// open (the runtime passes the closed row when it has it) is read again for
// how it ended; one that is still open then (this process is stopping and
// leaves it to the reaper) is not counted.
func (m *Metrics) RunFinished(ctx context.Context, run services.Run, trigger services.Message) {
	if _, ok := m.active.LoadAndDelete(run.ID); ok {
		m.runsActive.Dec()
	}
	if run.FinishedAt == nil && m.opts.Runs != nil {
		cur, err := m.opts.Runs.GetRun(ctx, run.ID)
		if err != nil {
			m.log.Warn("metrics: read finished run", "run_id", run.ID, "err", err)
			return
		}
		run = cur
	}
	if run.FinishedAt == nil {
		return
	}
	status := label(string(run.Status))
	m.runsFinished.WithLabelValues(status).Inc()
	if d := run.FinishedAt.Sub(run.StartedAt); d >= 0 {
		m.runDuration.WithLabelValues(status).Observe(d.Seconds())
	}
	m.promptTokens.Add(float64(max(run.PromptTokens, 0)))
	m.completionTokens.Add(float64(max(run.CompletionTokens, 0)))
	m.cachedTokens.Add(float64(max(run.CachedTokens, 0)))
	m.estimatedTokens.Add(float64(max(run.EstimatedPromptTokens, 0)))
	if run.PromptTokenBudget > 0 && run.EstimatedPromptTokens > 0 {
		m.budgetUse.Observe(float64(run.EstimatedPromptTokens) / float64(run.PromptTokenBudget))
	}
	if run.ParentRunID != 0 {
		m.handoffs.WithLabelValues(status).Inc()
	}
}

// FireObserved counts one fire of a schedule by its result (ok, notified,
// error, interrupted).
func (m *Metrics) FireObserved(result string) {
	m.fires.WithLabelValues(label(result)).Inc()
}

// CompactionObserved counts one compaction attempt by its result, a short
// lowercase word such as ok, failed, timeout, invalid or skipped (anything
// else is counted as "other" to keep the label set small).
func (m *Metrics) CompactionObserved(result string) {
	m.compactions.WithLabelValues(label(result)).Inc()
}

// BudgetObserved counts one model call's settled tokens and cost against
// its kind's budgets, or one call a budget refused.
func (m *Metrics) BudgetObserved(kind services.BudgetKind, tokens int, cost services.Money, refused bool) {
	if refused {
		m.budgetRefused.WithLabelValues(label(string(kind))).Inc()
		return
	}
	m.budgetTokens.WithLabelValues(label(string(kind))).Add(float64(max(tokens, 0)))
	m.budgetCost.WithLabelValues(label(string(kind))).Add(max(cost, 0).USD())
}

// TelegramSendError counts one failed Telegram send by its error code: the
// Bot API's error_code / HTTP status ("429", "403", "400"), or "network" when
// no answer came back.
func (m *Metrics) TelegramSendError(code string) {
	m.telegramErrors.WithLabelValues(label(code)).Inc()
}

// MCPCallObserved counts one call to an MCP server's tool: code is "" for
// success, else the error code of the result.
func (m *Metrics) MCPCallObserved(server, _ string, d time.Duration, code string) {
	result := "ok"
	if code != "" {
		result = strings.ToLower(code)
	}
	m.mcpCalls.WithLabelValues(label(server), label(result)).Inc()
	m.mcpDuration.WithLabelValues(label(server)).Observe(d.Seconds())
}

// TelegramSendErrorCode is TelegramSendError for a numeric code (0: network).
func (m *Metrics) TelegramSendErrorCode(code int) {
	if code == 0 {
		m.TelegramSendError("network")
		return
	}
	m.TelegramSendError(strconv.Itoa(code))
}

// ObserveRequest counts one answered HTTP request. route is the matched
// route pattern (never the raw path, so ids do not multiply the series).
func (m *Metrics) ObserveRequest(method, route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
}

// label keeps a caller-supplied label value short and plain so a bug cannot
// create unbounded series.
func label(v string) string {
	if v == "" {
		return "unknown"
	}
	if len(v) > 32 {
		return "other"
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return "other"
		}
	}
	return v
}

type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

type slogPromLogger struct{ log *slog.Logger }

func (l slogPromLogger) Println(v ...any) { l.log.Warn("metrics: exposition", "err", v) }
