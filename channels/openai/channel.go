// Package openai is the OpenAI-compatible channel "api": POST
// /v1/chat/completions and GET /v1/models, so any OpenAI client or front
// end can talk to the agent. The web server mounts it at /v1 behind the
// owner's authentication (web.OpenAIChannel) and hands it every error
// under /v1, which it answers in OpenAI's shape.
//
// The server keeps the history: only the last user message of a request is
// stored (as the inbound message of channel api), and the answer is the
// agent's final answer to it; the client's system messages are that turn's
// instruction, and its settings (max_tokens, temperature, stop,
// response_format, images) go with the message to the turn
// (services.TurnRequest). Unsupported fields are refused by name
// (request.go); a failed turn is an OpenAI-shaped error with a status that
// fits what failed (errors.go). The request's `user` field picks the
// timeline: absent, the owner's; a value, the timeline "api:<user>". See
// docs/API.md.
package openai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/switchboard/switchboard/services"
)

// ModelID is the one model GET /v1/models lists.
const ModelID = "switchboard"

// DefaultTurnTimeout bounds how long a request waits for the agent's
// answer when Config.TurnTimeout is zero.
const DefaultTurnTimeout = 10 * time.Minute

// defaultMaxInstruction bounds the joined system messages when
// Config.MaxMessageBytes is zero.
const defaultMaxInstruction = 32 << 10

// maxUser bounds a `user` value used verbatim in a timeline name.
const maxUser = 64

// RunReader reads agent runs: the channel maps streamed events to the run
// its message triggered and reports the run's token usage.
type RunReader interface {
	// GetRun returns one run; ENOTFOUND when absent.
	GetRun(ctx context.Context, id int64) (services.Run, error)
}

// Deps are the channel's collaborators.
type Deps struct {
	Logger *slog.Logger
	Chat   services.ChatService
	Hub    services.Feed
	// Runs lets the channel stream its run's text and report token usage
	// (optional: without it the answer comes whole at the end, usage 0).
	Runs RunReader
	// Media stores a request's images as the message's attachments
	// (optional: without it images go to the turn only).
	Media services.Media
	// Stopper stops the run of a request whose client went away (optional:
	// the run goes on to its end).
	Stopper services.TurnStopper
}

// Config are the channel's settings.
type Config struct {
	// OwnerTimeline is the timeline of a request without `user`.
	OwnerTimeline string
	// Provider names the model provider: "offline" refuses every request
	// but a command.
	Provider string
	// MaxMessageBytes bounds the joined system messages (zero: 32 KiB).
	MaxMessageBytes int
	// ModelReadsImages lets clients send images (image_url parts), which go
	// to the model as image parts (LLM_IMAGES=1); false: refused.
	ModelReadsImages bool
	// TurnTimeout bounds a request's wait for its answer (zero:
	// DefaultTurnTimeout).
	TurnTimeout time.Duration
}

// Channel serves the /v1 routes.
type Channel struct {
	deps Deps
	cfg  Config
	log  *slog.Logger
}

// New builds the channel.
func New(deps Deps, cfg Config) *Channel {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = defaultMaxInstruction
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = DefaultTurnTimeout
	}
	return &Channel{deps: deps, cfg: cfg, log: deps.Logger}
}

// Mount adds the routes to g, the /v1 group the web server authenticates:
// bodies up to BodyLimit (images travel inline), every other path 404 (405
// with Allow for a known path asked with another method).
func (ch *Channel) Mount(g *echo.Group) {
	g.Use(middleware.BodyLimit(strconv.Itoa(BodyLimit/1024) + "K"))
	g.GET("/models", ch.handleModels)
	g.GET("/models/:model", ch.handleModel)
	g.POST("/chat/completions", ch.handleChatCompletions)
	g.RouteNotFound("", noRoute)
	g.RouteNotFound("/*", noRoute)
}

// noRoute answers a /v1 request no route takes: 405 with Allow for a known
// path asked with another method, else 404.
func noRoute(c echo.Context) error {
	p := strings.TrimSuffix(c.Request().URL.Path, "/")
	model, isModel := strings.CutPrefix(p, "/v1/models/")
	switch {
	case p == "/v1/chat/completions":
		c.Response().Header().Set("Allow", "POST")
	case p == "/v1/models" || isModel && model != "" && !strings.Contains(model, "/"):
		c.Response().Header().Set("Allow", "GET")
	default:
		return echo.ErrNotFound
	}
	return echo.ErrMethodNotAllowed
}

// modelCreated is a fixed creation time (the endpoint's first release).
const modelCreated = 1767225600 // 2026-01-01T00:00:00Z

// theModel is the one model.
var theModel = Model{ID: ModelID, Object: "model", Created: modelCreated, OwnedBy: "switchboard"}

func (ch *Channel) handleModels(c echo.Context) error {
	return c.JSON(http.StatusOK, ModelList{Data: []Model{theModel}, Object: "list"})
}

func (ch *Channel) handleModel(c echo.Context) error {
	if c.Param("model") != ModelID {
		return ch.fail(c, modelNotFound(c.Param("model")))
	}
	return c.JSON(http.StatusOK, theModel)
}

// modelNotFound refuses a model GET /v1/models does not list.
func modelNotFound(model string) *apiFail {
	return &apiFail{status: http.StatusNotFound, code: "model_not_found", param: "model",
		msg: "The model " + strconv.Quote(model) + " does not exist; the only model is " + strconv.Quote(ModelID) + " (GET /v1/models)"}
}

// userRE is a `user` value used verbatim in its timeline's name.
var userRE = regexp.MustCompile(`^[A-Za-z0-9._@-]+$`)

// Timeline returns the timeline a request's `user` selects: the owner's
// when absent or empty, else "api:<user>" for a value of at most 64 of
// A-Z a-z 0-9 . _ @ -, and "api:h-<first 16 hex digits of its SHA-256>" for
// any other value (so every value gets its own, stable timeline).
func Timeline(owner string, user *string) string {
	if user == nil || *user == "" {
		return owner
	}
	u := *user
	if len(u) <= maxUser && userRE.MatchString(u) {
		return "api:" + u
	}
	h := sha256.Sum256([]byte(u))
	return "api:h-" + hex.EncodeToString(h[:8])
}
