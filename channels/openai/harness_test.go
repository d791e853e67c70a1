package openai_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/internal/polltest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func TestMain(m *testing.M) { apptest.Main(m) }

const testToken = "test-owner-token-0123456789"

// poll waits for a condition (polltest.Until): a state, never a duration.
var poll = polltest.Until

// instance is a whole Switchboard instance (app.New through apptest) with
// the channel mounted at /v1 by its web server.
type instance struct {
	URL   string
	Store *repository.Store
}

// stackOpts shape a test instance: with a model, the agent answers.
type stackOpts struct {
	model *llmtest.Server
	// turnTimeout bounds a request's wait (0: the default).
	turnTimeout time.Duration
	// images: the model reads images (LLM_IMAGES=1).
	images bool
	// modelTimeout is LLM_TIMEOUT (0: the default).
	modelTimeout time.Duration
}

// newStack starts a whole instance on pool's schema: with a model the
// agent answers, without one nobody does.
func newStack(t testing.TB, pool *pgxpool.Pool, o stackOpts) *instance {
	t.Helper()
	in := apptest.Start(t, apptest.Options{
		DatabaseURL: pool.Config().ConnString(), Model: o.model, Token: testToken,
		Configure: func(opts *app.Config) {
			opts.OpenAI.TurnTimeout = o.turnTimeout
			opts.Agent.PassImages, opts.Context.Images, opts.OpenAI.ModelReadsImages = o.images, o.images, o.images
			if o.modelTimeout > 0 {
				opts.LLM.Timeout = o.modelTimeout
			}
		},
	})
	return &instance{URL: in.URL, Store: in.Store}
}

// do and newSchemaURL are apptest's: the request helper and a migrated
// schema's URL, shared with the other packages testing over HTTP.
var (
	do           = apptest.Do
	newSchemaURL = apptest.SchemaURL
)
