// Package tui is Switchboard's terminal channel: a bubbletea client of a
// running server's REST and websocket API (docs/API.md). It never touches the
// database or the services; it speaks the same protocol as the chat page.
//
// The package has three parts that only meet through tea.Msg values:
//   - Client: REST calls and the websocket dial (client.go);
//   - Feed: one goroutine that keeps a websocket open, reconnects with
//     backoff and turns frames into messages for the model (feed.go);
//   - Model: the bubbletea model, which renders the timeline and can be
//     driven in tests by plain messages (model.go, render.go).
package tui

import (
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

// meta is the part of a message's metadata the TUI reads; a malformed one
// renders plainly (metadata is advisory).
func meta(m wire.Message) services.MessageMeta {
	md, _ := services.DecodeMeta(m.Metadata)
	return md
}

// SourceTUI is the source every message sent from the terminal carries.
const SourceTUI = string(services.SourceTUI)
