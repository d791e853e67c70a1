// Package e2e holds the fault and scale tests: each runs the real
// switchboard binary (built once per run, internal/servetest) against
// PostgreSQL, a fake model and the strict Telegram server, kills processes
// at chosen points and checks that every durable effect happened exactly
// once. docs/RELIABILITY.md and docs/SCALING.md describe what they prove.
package e2e

import (
	"testing"

	"github.com/switchboard/switchboard/internal/polltest"
	"github.com/switchboard/switchboard/internal/servetest"
)

func TestMain(m *testing.M) { servetest.Main(m) }

var (
	buildBinary       = servetest.Binary
	freshDB           = servetest.FreshDB
	migratedDB        = servetest.MigratedDB
	startServeAt      = servetest.StartAt
	freePort          = servetest.FreePort
	listenRE          = servetest.ListenRE
	generatedTokenRE  = servetest.GeneratedTokenRE
	newTokenRE        = servetest.NewTokenRE
	waitFor           = servetest.WaitFor
	waitLong          = servetest.WaitLong
	pendingApprovalID = servetest.PendingApprovalID
	pause             = servetest.Pause
	// pollEvery waits for a condition: a state another process, the
	// database or a goroutine reaches, never a duration.
	pollEvery = polltest.Every
)

// ownerTGID is the Telegram user id the tests configure as the owner.
const ownerTGID = 1

// tgToken is the bot token the strict Telegram server accepts.
const tgToken = "5555:emulated-bot-token"
