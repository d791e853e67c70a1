package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"
	"github.com/switchboard/switchboard/web/wire"
)

// Messages the Feed sends to the model.
type (
	// MessageMsg is a timeline message from the websocket.
	MessageMsg struct{ Message wire.Message }
	// EventMsg is a run status or streamed text event.
	EventMsg struct{ Event wire.Event }
	// ConnMsg reports the websocket's state.
	ConnMsg struct {
		State ConnState
		// Err is why the connection is offline (nil when live).
		Err error
	}
	// ProtocolErrorMsg reports a wire.Frame the client could not understand; the
	// feed skips it and keeps reading.
	ProtocolErrorMsg struct{ Err error }
	// ServerErrorMsg is an error frame: the server rejected something we sent.
	ServerErrorMsg struct{ Text string }
)

// ConnState is the websocket's state as the status line shows it.
type ConnState int

// Connection states.
const (
	Connecting ConnState = iota
	Live
	Offline
)

// Reconnect backoff: 0.5 s doubling to 5 s, reset once a connection is ready.
const (
	MinBackoff = 500 * time.Millisecond
	MaxBackoff = 5 * time.Second
)

// Feed keeps one websocket to the server open and sends what arrives to the
// model. After a drop it reconnects with ?after=<last id it delivered>, so the
// server replays exactly the messages it missed.
type Feed struct {
	Client *Client
	// Send delivers a message to the model (tea.Program.Send). It may block.
	Send func(msg any)
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults above).
	MinBackoff, MaxBackoff time.Duration
	// PingEvery detects a dead connection the OS has not noticed (default 20 s).
	PingEvery time.Duration
}

// Run connects and reconnects until ctx ends. after is the newest id the
// model already has.
func (f *Feed) Run(ctx context.Context, after int64) {
	minB, maxB := f.MinBackoff, f.MaxBackoff
	if minB <= 0 {
		minB = MinBackoff
	}
	if maxB < minB {
		maxB = max(MaxBackoff, minB)
	}
	backoff := minB
	last := after
	for ctx.Err() == nil {
		ready, err := f.session(ctx, &last)
		if ctx.Err() != nil {
			return
		}
		if ready {
			backoff = minB
		}
		f.Send(ConnMsg{State: Offline, Err: err})
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxB)
	}
}

// session runs one websocket connection until it fails; ready reports
// whether it got as far as the server's "ready" frame.
func (f *Feed) session(ctx context.Context, last *int64) (ready bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := f.Client.Dial(dctx, *last)
	cancel()
	if err != nil {
		return false, err
	}
	defer conn.CloseNow()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go f.ping(sctx, conn)
	for {
		typ, data, err := conn.Read(sctx)
		if err != nil {
			return ready, closeReason(err)
		}
		if typ != websocket.MessageText {
			f.Send(ProtocolErrorMsg{Err: errors.New("the server sent a binary frame")})
			continue
		}
		var fr wire.Frame
		if err := json.Unmarshal(data, &fr); err != nil {
			f.Send(ProtocolErrorMsg{Err: fmt.Errorf("bad JSON frame: %v", err)})
			continue
		}
		switch fr.Type {
		case "message":
			if fr.Message == nil || fr.Message.ID <= 0 {
				f.Send(ProtocolErrorMsg{Err: errors.New("message wire.Frame without a message")})
				continue
			}
			if fr.Message.ID <= *last {
				continue // already delivered (the server never sends these; be safe)
			}
			*last = fr.Message.ID
			f.Send(MessageMsg{Message: *fr.Message})
		case "ready":
			ready = true
			f.Send(ConnMsg{State: Live})
		case "event":
			if fr.Event == nil {
				f.Send(ProtocolErrorMsg{Err: errors.New("event wire.Frame without an event")})
				continue
			}
			f.Send(EventMsg{Event: *fr.Event})
		case "error":
			f.Send(ServerErrorMsg{Text: fr.Error})
		default:
			// A newer server's wire.Frame type: ignore it, as the protocol allows.
		}
	}
}

// ping closes a connection that stopped answering, so Read returns.
func (f *Feed) ping(ctx context.Context, conn *websocket.Conn) {
	every := f.PingEvery
	if every <= 0 {
		every = 20 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				conn.CloseNow()
				return
			}
		}
	}
}

// closeReason turns a read error into a short reason for the status line.
func closeReason(err error) error {
	switch st := websocket.CloseStatus(err); st {
	case -1:
		return fmt.Errorf("connection lost: %s", reason(err))
	case websocket.StatusGoingAway:
		return errors.New("server is restarting")
	default:
		var ce websocket.CloseError
		if errors.As(err, &ce) && ce.Reason != "" {
			return fmt.Errorf("server closed the connection: %s", ce.Reason)
		}
		return fmt.Errorf("server closed the connection (%d)", int(st))
	}
}
