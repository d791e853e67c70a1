// Package web is Switchboard's HTTP face on echo: REST API, websocket hub,
// owner auth, and the embedded chat and debug pages. It speaks to services
// only through their types and never touches SQL or prompts.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/switchboard/switchboard/services"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 256 << 10

// Config are the server's settings: what the environment sets
// (cmd/switchboard's env table), nothing built.
type Config struct {
	// OwnerTimeline is the timeline web and TUI clients read and write.
	OwnerTimeline string
	// Flags are shown to the owner (debug page, /api/whoami).
	Flags services.Flags
	// SecureCookies sets the Secure attribute (PUBLIC_URL is https).
	SecureCookies bool
	// AllowedOrigins are extra websocket origins (host patterns); the
	// request's own host is always allowed.
	AllowedOrigins []string
	// RateLimit bounds requests per identity (zero: unlimited); see ratelimit.go.
	RateLimit RateLimit
	// ScrapeTokenHash is the SHA-256 of METRICS_TOKEN: a scraper sending it
	// as a bearer token may read /metrics (and nothing else). Empty: only
	// the owner's credentials are accepted. See metrics.go.
	ScrapeTokenHash []byte
	// Conns bounds connections and their idle time (zero fields: the
	// defaults of DefaultConnLimits); see conns.go.
	Conns ConnLimits
	// Model and Provider name the model in use (the page says when it is
	// the offline one; the app names the provider it built);
	// MaxMessageBytes is the limit of one message (CHAT_MAX_CONTENT_BYTES:
	// the page names it before sending).
	Model, Provider string
	MaxMessageBytes int
}

// Deps are the server's collaborators. Each optional one is a capability:
// given, the routes it backs answer; nil, they answer 503 (or 404) and the
// page says the feature is off.
type Deps struct {
	Logger *slog.Logger
	Chat   services.ChatService
	Hub    services.Feed
	// TokenHash is the SHA-256 of the owner's login token.
	TokenHash []byte
	// Credentials, when set, is read on every authentication instead of
	// TokenHash (the token stored in the database): a `switchboard token
	// reset` takes effect at once on every running instance.
	Credentials OwnerCredentials
	// Sessions stores browser sessions (the database, so every instance
	// knows them); nil keeps them in memory.
	Sessions SessionStore
	// Ready reports whether the service can take traffic (database reachable,
	// migrations current); nil means always ready. Its error text is shown.
	Ready func(ctx context.Context) error
	// ContextStore and Inspector back the rules, memory and prompt
	// inspection API (optional).
	ContextStore services.ContextStore
	Inspector    services.PromptInspector
	// Manifests hold the owner's context manifest (GET/PUT
	// /api/context/manifest; nil: 503).
	Manifests services.ContextManifests
	// ContextBudgets hold the owner's budget profile (GET/PUT
	// /api/context/budget; nil: 503).
	ContextBudgets services.ContextBudgets
	// Blocks list the owner's workspace files' blocks (GET
	// /api/workspace/blocks; nil: 503).
	Blocks services.WorkspaceBlocks
	// Tools lists the agent's tools and MCP servers (GET /api/tools).
	Tools services.ToolCatalog
	// Activity reads the tool calls shown under answers; nil: none shown.
	Activity services.ToolActivity
	// OpenAI is the OpenAI-compatible channel, mounted at /v1 (nil: /v1
	// is not served). See openai.go.
	OpenAI OpenAIChannel
	// Metrics mounts GET /metrics and counts requests and websockets
	// (optional; zero: /metrics answers 404). See metrics.go.
	Metrics Metrics
	// Debug backs the owner's debug page and API (optional; nil: the debug
	// API answers 503). See debug.go.
	Debug DebugSource
	// Pairings backs the Telegram pairing page and API (optional; nil: the
	// channel shows as not configured). TelegramWebhook is mounted at
	// POST /telegram/webhook in webhook mode (nil: the route answers 404).
	// See pairing.go.
	Pairings        services.Pairings
	TelegramWebhook http.Handler
	// Schedules backs /api/schedules (nil: it answers 503); see
	// schedules_api.go.
	Schedules services.Schedules
	// Budgets backs GET /api/budget (nil: it answers 503); see budget_api.go.
	Budgets services.Budgets
	// Approvals backs /api/approvals and /api/policy (nil: 503).
	Approvals services.ApprovalDecider
	// ToolResults backs GET /api/runs/:run/tools/:call (a tool call's
	// result under an answer on the page; nil: 503). See tool_results.go.
	ToolResults services.ToolResults
	// Media and Attachments back uploads (POST /api/messages as
	// multipart/form-data) and downloads (GET /api/attachments/:id); nil:
	// uploads are refused. See media.go.
	Media       services.Media
	Attachments services.AttachmentStore
	// Audit records logins, logouts, pairing decisions and rule and
	// schedule changes, and backs GET /api/debug/audit (nil: nothing is
	// recorded and the endpoint answers 503). See audit.go.
	Audit AuditTrail
}

// options are what the server reads: its collaborators and settings.
type options struct {
	Deps
	Config
}

// Server is the web server.
type Server struct {
	echo      *echo.Echo
	opts      options
	log       *slog.Logger
	auth      *auth
	http      *http.Server
	wsClients atomic.Int64
	conns     *connLimiter
	// ownerLimit and anonLimit are the rate limits (nil: off); websocket
	// post frames take the owner's tokens too.
	ownerLimit, anonLimit *limiter
}

// New builds the server and its routes (nothing in it can fail: the
// settings were checked when the environment was read).
func New(d Deps, cfg Config) *Server {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	opts := options{Deps: d, Config: cfg}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	s := &Server{echo: e, opts: opts, log: opts.Logger,
		auth: &auth{tokenHash: opts.TokenHash, credentials: opts.Credentials, now: time.Now, sessions: opts.Sessions}}
	s.ownerLimit = newLimiter(opts.RateLimit.OwnerPerMinute, opts.RateLimit.OwnerBurst, time.Now)
	s.anonLimit = newLimiter(opts.RateLimit.AnonPerMinute, opts.RateLimit.AnonBurst, time.Now)
	s.conns = newConnLimiter(opts.Conns.withDefaults())
	cl := s.conns.limits
	s.http = &http.Server{Handler: e, ReadHeaderTimeout: cl.ReadHeaderTimeout, ReadTimeout: cl.ReadTimeout,
		WriteTimeout: cl.WriteTimeout, IdleTimeout: cl.IdleTimeout, ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)}
	if s.auth.sessions == nil {
		s.auth.sessions = &memSessions{}
	}
	e.HTTPErrorHandler = func(err error, c echo.Context) { s.handleError(c, err) }
	// Middleware order: request id first (so every log line has it), then
	// the access log (sees every final status), then panic recovery, then
	// the body limit, then the per-identity rate limit, then the check of
	// query and path parameters for NUL and invalid UTF-8.
	e.Use(middleware.RequestID())
	e.Use(s.accessLog)
	e.Use(middleware.Recover())
	// Uploads (MEDIA_MAX_BYTES, in media.go) and /v1 (the channel's: images
	// travel inline) have their own bounds.
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: "256K",
		Skipper: func(c echo.Context) bool { return isUpload(c) || isAPIPath(c.Request().URL.Path) }}))
	e.Use(s.rateLimiter())
	e.Use(checkParams)

	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/login", s.handleLoginPage)
	e.POST("/login", s.handleLogin)
	e.POST("/logout", s.handleLogout)
	e.GET("/", s.handleChatPage)
	e.GET("/static/*", s.handleStatic)
	// Browsers ask for it on every page; the pages declare none.
	e.GET("/favicon.ico", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })

	api := e.Group("/api", s.requireOwner)
	api.POST("/messages", s.handlePostMessage)
	api.GET("/timeline", s.handleTimeline)
	api.GET("/whoami", s.handleWhoami)
	api.GET("/ws", s.handleWS)
	api.GET("/tools", s.handleTools)
	api.GET("/attachments/:id", s.handleAttachment)
	s.registerContextRoutes(api)
	s.registerScheduleRoutes(api)
	api.GET("/budget", s.handleBudget)
	s.registerApprovalRoutes(api)
	s.registerToolResultRoutes(api)
	s.registerPairingRoutes(e, api)
	s.registerDebugRoutes(e, api)
	s.registerMetricsRoutes(e)
	s.mountOpenAI(e)
	return s
}

// Handler returns the root handler (for tests with httptest).
func (s *Server) Handler() http.Handler { return s.echo }

// Connections is the number of connections Serve holds open now.
func (s *Server) Connections() int64 { return s.conns.total.Load() }

// WebsocketClients is the number of open websocket connections.
func (s *Server) WebsocketClients() int64 { return s.wsClients.Load() }

// Serve accepts connections on l until Shutdown, within Options.Conns:
// read, write and idle timeouts (streams and websockets clear theirs) and
// caps on concurrent connections per client address and in total.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.Serve(s.conns.wrap(l))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.http.Shutdown(ctx)
}

// Close stops accepting and closes every connection at once (hijacked
// ones, websockets, excepted).
func (s *Server) Close() error { return s.http.Close() }

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(c echo.Context) error {
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.opts.Ready(ctx); err != nil {
			c.Response().Header().Set("Retry-After", "5")
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": err.Error()})
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
