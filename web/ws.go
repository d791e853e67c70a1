package web

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

// The websocket protocol is package wire's (web/wire).
const (
	wsWriteTimeout = 10 * time.Second
	wsPingEvery    = 30 * time.Second
	wsReadLimit    = 64 << 10
	// wsAuthEvery is how often a websocket checks that the credentials it
	// was opened with are still in force (a token reset or a logout on any
	// instance closes it within this time).
	wsAuthEvery = time.Second
	// StatusRevoked closes a websocket whose token was reset or whose
	// session ended: log in again.
	StatusRevoked websocket.StatusCode = websocket.StatusPolicyViolation
	// StatusSlowConsumer closes a connection that fell behind; reconnect with ?after=.
	StatusSlowConsumer websocket.StatusCode = wire.StatusSlowConsumer
)

func (s *Server) handleWS(c echo.Context) error {
	after, err := queryID(c, "after")
	if err != nil {
		return err
	}
	hasAfter := c.QueryParam("after") != ""
	// A websocket lives as long as the client stays: no server read or
	// write deadline (wsWriteTimeout and pings bound each write instead).
	clearDeadlines(c.Response(), time.Time{})
	conn, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{
		OriginPatterns: s.opts.AllowedOrigins,
	})
	if err != nil {
		return nil // Accept wrote the response
	}
	conn.SetReadLimit(wsReadLimit)
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	s.wsClients.Add(1)
	defer s.wsClients.Add(-1)
	if o := s.opts.Metrics.Websockets; o != nil {
		o.WebsocketOpened()
		defer o.WebsocketClosed()
	}

	sub, err := s.opts.Hub.Subscribe(ctx, s.opts.OwnerTimeline, 1024)
	if err != nil {
		conn.Close(websocket.StatusTryAgainLater, "database unavailable, retry")
		return nil
	}
	defer s.opts.Hub.Unsubscribe(sub)

	out := make(chan wire.Frame, 64)
	go s.wsReader(ctx, cancel, conn, out)

	cursor := sub.StartID()
	if hasAfter {
		cursor = after
		// Backlog: every row after the client's id, up to (at least) where
		// the live subscription starts.
		for {
			page, err := s.opts.Chat.TimelineAfter(ctx, s.opts.OwnerTimeline, cursor, 500)
			if err != nil {
				conn.Close(websocket.StatusTryAgainLater, "database unavailable, retry")
				return nil
			}
			for i, mj := range s.present(ctx, page.Messages) {
				if err := wsWrite(ctx, conn, wire.Frame{Type: "message", Message: &mj}); err != nil {
					return nil
				}
				cursor = page.Messages[i].ID
			}
			if len(page.Messages) < 500 {
				break
			}
		}
	}
	if err := wsWrite(ctx, conn, wire.Frame{Type: "ready", LastID: cursor}); err != nil {
		return nil
	}
	ping := time.NewTicker(wsPingEvery)
	defer ping.Stop()
	recheck := time.NewTicker(wsAuthEvery)
	defer recheck.Stop()
	req := c.Request()
	for {
		select {
		case <-recheck.C:
			actx, acancel := context.WithTimeout(ctx, wsWriteTimeout)
			gone := s.auth.revoked(actx, req)
			acancel()
			if gone {
				conn.Close(StatusRevoked, "credentials revoked (token reset or logout): log in again")
				return nil
			}
		case <-ctx.Done():
			conn.Close(websocket.StatusNormalClosure, "")
			return nil
		case f := <-out:
			if err := wsWrite(ctx, conn, f); err != nil {
				return nil
			}
		case it, ok := <-sub.Items():
			if !ok {
				conn.Close(StatusSlowConsumer, "too slow: reconnect with after=last id")
				return nil
			}
			var f wire.Frame
			switch {
			case it.Message != nil:
				if it.Message.ID <= cursor {
					continue // already sent from the backlog
				}
				cursor = it.Message.ID
				mj := s.present(ctx, []services.Message{*it.Message})[0]
				f = wire.Frame{Type: "message", Message: &mj}
			case it.Event != nil:
				f = wire.Frame{Type: wire.FrameEvent, Event: wireEvent(it.Event)}
			}
			if err := wsWrite(ctx, conn, f); err != nil {
				return nil
			}
		case <-ping.C:
			pctx, pcancel := context.WithTimeout(ctx, wsWriteTimeout)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil {
				return nil
			}
		}
	}
}

// wsReader handles client frames; only "post" is accepted.
func (s *Server) wsReader(ctx context.Context, cancel context.CancelFunc, conn *websocket.Conn, out chan<- wire.Frame) {
	defer cancel()
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			s.wsReply(ctx, out, "frames must be JSON text")
			continue
		}
		if !utf8.Valid(data) {
			s.wsReply(ctx, out, "frame is not valid UTF-8 (at byte "+strconv.Itoa(invalidUTF8At(data))+"); nothing stored")
			continue
		}
		var f wire.Frame
		if err := json.Unmarshal(data, &f); err != nil {
			s.wsReply(ctx, out, "invalid JSON frame: "+err.Error())
			continue
		}
		if f.Type != "post" {
			s.wsReply(ctx, out, `unknown frame type "`+f.Type+`" (want post)`)
			continue
		}
		// Posts spend the owner's request budget, as REST posts do.
		if s.ownerLimit != nil {
			if ok, wait := s.ownerLimit.allow("owner"); !ok {
				secs := retrySeconds(wait)
				s.wsSend(ctx, out, wire.Frame{Type: "error", Code: "RATE_LIMITED", RetryAfter: secs,
					Error: "too many requests; this post was not stored; retry in " + strconv.Itoa(secs) + " s", ClientKey: f.ClientKey})
				continue
			}
		}
		p, err := s.ownerPost(services.SourceWeb, f.Source, f.Content, f.ClientKey)
		if err == nil {
			err = checkTextFields(f)
		}
		if err == nil {
			_, _, err = s.opts.Chat.Post(ctx, p)
		}
		if err != nil {
			s.wsSend(ctx, out, wire.Frame{Type: "error", Error: services.ErrorMessage(err), Code: services.ErrorCode(err), ClientKey: f.ClientKey})
		}
	}
}

func (s *Server) wsReply(ctx context.Context, out chan<- wire.Frame, msg string) {
	s.wsSend(ctx, out, wire.Frame{Type: "error", Error: msg})
}

func (s *Server) wsSend(ctx context.Context, out chan<- wire.Frame, f wire.Frame) {
	select {
	case out <- f:
	case <-ctx.Done():
	}
}

func wsWrite(ctx context.Context, conn *websocket.Conn, f wire.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	err = conn.Write(wctx, websocket.MessageText, b)
	if errors.Is(err, context.DeadlineExceeded) {
		conn.Close(websocket.StatusPolicyViolation, "write timeout")
	}
	return err
}
