// Package chat is ChatService: the single entry for messages from every
// channel into a timeline, and the timeline reads channels use.
package chat

import (
	"context"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services"
)

// DefaultMaxContentBytes bounds one message's text.
const DefaultMaxContentBytes = 32 << 10

// TurnHandler starts the agent's answer to each newly stored user message.
// The agent runtime implements it; a nil handler does nothing.
type TurnHandler interface {
	// StartTurn runs in the transaction that stores msg: it queues the run
	// (its row and its job commit with the message, or nothing does) and
	// returns what to do once committed (announce the run, answer a
	// command), or nil.
	StartTurn(ctx context.Context, tx services.Tx, msg services.Message) (after func(context.Context), err error)
}

// TurnFunc is a TurnHandler of one function, as http.HandlerFunc is a
// handler.
type TurnFunc func(ctx context.Context, tx services.Tx, msg services.Message) (after func(context.Context), err error)

// StartTurn calls f.
func (f TurnFunc) StartTurn(ctx context.Context, tx services.Tx, msg services.Message) (func(context.Context), error) {
	return f(ctx, tx, msg)
}

// Deps are ChatService's collaborators.
type Deps struct {
	Store     services.Store
	Publisher services.Publisher
	// TxEvents sends a new message's event with the transaction that
	// stores its row, so the other instances hear it with the commit
	// (nil: it is published after the commit).
	TxEvents services.TxPublisher
	// Turns starts the answer to each new user message (nil: none).
	Turns  TurnHandler
	Logger *slog.Logger
	// CountTokens counts a message's tokens once, when it is stored (nil: not counted).
	CountTokens func(text string) int
	// Routers deliver replies to external channels, by the source of the
	// message being answered (e.g. "telegram").
	Routers map[services.Source]services.ReplyRouter
	// Notifiers deliver messages posted with NotifyOwner (a schedule's
	// notification) to the owner's external channels, in the post's
	// transaction.
	Notifiers []services.Notifier
}

// Config are ChatService's settings: what the environment sets.
type Config struct {
	// MaxContentBytes bounds a user message's text (0: DefaultMaxContentBytes).
	MaxContentBytes int
	// ScopedWrite writes context_scope explicitly (AGENT_CONTEXT_SCOPED_WRITE);
	// off, the column takes its default, which is also 'main'.
	ScopedWrite bool
	// LogContent allows message text in logs (LOG_CONTENT).
	LogContent bool
}

// options are what the service reads: its collaborators and settings.
type options struct {
	Deps
	Config
}

// Service is ChatService.
type Service struct {
	opts options
	log  *slog.Logger
	// txp is the publisher when it sends events with their transaction:
	// a new message's event then commits with its row.
	txp services.TxPublisher
}

// New returns a ChatService.
func New(d Deps, cfg Config) *Service {
	if cfg.MaxContentBytes <= 0 {
		cfg.MaxContentBytes = DefaultMaxContentBytes
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: options{Deps: d, Config: cfg}, log: log, txp: d.TxEvents}
}

// Post validates and stores a visible message in its timeline, publishes it
// after commit, and hands a new user message to the agent. A duplicate
// delivery (same DedupeKey) returns the first row with created=false and
// neither publishes nor starts a turn again.
// Errors: EINVALID (empty or non-UTF-8 text, unknown source, no timeline),
// ETOOLARGE (text over the limit), EUNAVAILABLE (database down).
func (s *Service) Post(ctx context.Context, p services.PostParams) (services.Message, bool, error) {
	var msg services.Message
	var created bool
	var after func(context.Context)
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		var err error
		if msg, created, err = s.PostTx(ctx, tx, p); err != nil {
			return err
		}
		if created && msg.Role == services.RoleUser && s.opts.Turns != nil {
			after, err = s.opts.Turns.StartTurn(ctx, tx, msg)
		}
		return err
	})
	if err != nil {
		return services.Message{}, false, err
	}
	s.Announce(ctx, msg, created)
	if after != nil {
		after(ctx)
	}
	return msg, created, nil
}

// PostTx validates and stores a message with the caller's transaction (so an
// answer and the end of its run commit together), and schedules a reply's
// delivery to its channel in the same transaction. After commit the caller
// calls Announce.
func (s *Service) PostTx(ctx context.Context, tx services.Tx, p services.PostParams) (services.Message, bool, error) {
	if p.Role == "" {
		p.Role = services.RoleUser
	}
	if p.Role != services.RoleUser {
		p.Content = CleanAnswer(p.Content)
	}
	if err := s.validate(p); err != nil {
		return services.Message{}, false, err
	}
	var cmd *services.ParsedCommand
	if p.Role == services.RoleUser {
		cmd = p.Command
		if cmd == nil {
			cmd = &services.ParsedCommand{}
			cmd.Name, cmd.Args, _ = services.ParseCommand(p.Content)
		}
		if cmd.Name == "" {
			cmd = nil
		}
	}
	if cmd != nil && len(p.Metadata) == 0 {
		p.Metadata = services.MessageMeta{Command: cmd.Name}.Encode()
	}
	if len(p.Attachments) > 0 {
		meta, err := services.DecodeMeta(p.Metadata)
		if err != nil {
			return services.Message{}, false, err
		}
		meta.Files = nil
		for _, a := range p.Attachments {
			meta.Files = append(meta.Files, a.Ref())
		}
		p.Metadata = meta.Encode()
	}
	nm := services.NewMessage{
		TimelineScope: p.TimelineScope,
		Role:          p.Role,
		Source:        p.Source,
		Content:       p.Content,
		Visible:       true,
		Metadata:      p.Metadata,
		DedupeKey:     p.DedupeKey,
		AgentID:       p.AgentID,
	}
	if s.opts.ScopedWrite {
		nm.ContextScope = services.MainScope
	}
	if s.opts.CountTokens != nil {
		nm.TokenCount = s.opts.CountTokens(p.Content)
	}
	msg, created, err := tx.InsertMessage(ctx, nm)
	if err != nil {
		return services.Message{}, false, err
	}
	msg.Command = cmd
	attrs := []any{"message_id", msg.ID, "timeline", msg.TimelineScope, "source", msg.Source, "role", msg.Role, "created", created}
	if s.opts.LogContent {
		attrs = append(attrs, "content", msg.Content)
	}
	s.log.Debug("message stored", attrs...)
	if created && s.txp != nil {
		// The other instances hear of it when it commits; this one when
		// the caller announces it.
		if err := s.txp.PublishTx(ctx, tx, messageEvent(msg)); err != nil {
			// As after commit: subscribers catch up on their next event.
			s.log.Warn("publish event", "type", services.EventMessage, "id", msg.ID, "err", err)
		}
	}
	if created {
		for _, a := range p.Attachments {
			a.MessageID, a.TimelineScope = msg.ID, msg.TimelineScope
			if _, err := tx.InsertAttachment(ctx, a); err != nil {
				return services.Message{}, false, err
			}
		}
	}
	if p.ReplyTo != 0 {
		if err := s.routeReplyTx(ctx, tx, p.ReplyTo, p.ReplyToMessage, msg); err != nil {
			return services.Message{}, false, err
		}
	}
	if p.NotifyOwner && created {
		for _, n := range s.opts.Notifiers {
			if err := n.NotifyOwnerTx(ctx, tx, msg); err != nil {
				return services.Message{}, false, err
			}
		}
	}
	return msg, created, nil
}

// CleanAnswer makes text the service itself writes (the agent's answers,
// notices) storable whatever the model returned: PostgreSQL text cannot hold
// U+0000, so each NUL becomes U+FFFD, and invalid UTF-8 the same.
func CleanAnswer(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	return strings.ReplaceAll(text, "\x00", "\uFFFD")
}

// Announce does what follows a committed post: publish a new message
// (to this instance: the others heard of it with the commit, when the
// publisher sends events with transactions). A reply's delivery was
// scheduled in the post's transaction.
func (s *Service) Announce(ctx context.Context, msg services.Message, created bool) {
	switch {
	case !created:
	case s.txp != nil:
		s.txp.PublishCommitted(ctx, messageEvent(msg))
	default:
		s.publish(ctx, messageEvent(msg))
	}
}

// messageEvent says msg was stored.
func messageEvent(msg services.Message) services.Event {
	return services.Event{Type: services.EventMessage, TimelineScope: msg.TimelineScope, ID: msg.ID}
}

// routeReplyTx hands a reply to the router of the answered message's
// channel, in tx, the reply's transaction, so the reply and its delivery
// commit together; routers are idempotent per reply, so a retried post
// schedules nothing twice. A reply the router refuses (EINVALID: the
// answered message names no chat) is stored all the same. held, when not
// nil, is the answered message as the caller holds it (not read again).
func (s *Service) routeReplyTx(ctx context.Context, tx services.Tx, toID int64, held *services.Message, reply services.Message) error {
	var to services.Message
	if held != nil && held.ID == toID {
		to = *held
	} else {
		var err error
		if to, err = tx.GetMessage(ctx, toID); err != nil {
			s.log.Warn("route reply: read answered message", "message_id", toID, "err", err)
			return nil
		}
	}
	if to.TimelineScope != reply.TimelineScope {
		s.log.Error("route reply: answered message is in another timeline", "message_id", toID)
		return nil
	}
	r := s.opts.Routers[to.Source]
	if r == nil {
		return nil
	}
	if err := r.RouteReplyTx(ctx, tx, to, reply); err != nil {
		if services.IsKind(err, services.EINVALID) {
			s.log.Error("route reply", "source", to.Source, "reply_id", reply.ID, "err", err)
			return nil
		}
		return err
	}
	return nil
}

func (s *Service) publish(ctx context.Context, e services.Event) {
	if s.opts.Publisher == nil {
		return
	}
	if err := s.opts.Publisher.Publish(ctx, e); err != nil {
		// Stored already; subscribers catch up on their next event or reconnect.
		s.log.Warn("publish event", "type", e.Type, "id", e.ID, "err", err)
	}
}

func (s *Service) validate(p services.PostParams) error {
	if p.TimelineScope == "" {
		return services.Errorf(services.EINVALID, "message has no timeline")
	}
	if _, ok := services.Sources[p.Source]; !ok {
		return services.Errorf(services.EINVALID, "unknown message source %q", p.Source)
	}
	if !utf8.ValidString(p.Content) {
		return services.Errorf(services.EINVALID, "message text is not valid UTF-8")
	}
	if strings.TrimSpace(p.Content) == "" && len(p.Attachments) == 0 {
		return services.Errorf(services.EINVALID, "message text is empty")
	}
	for _, a := range p.Attachments {
		if a.StorageKey == "" || a.SHA256 == "" {
			return services.Errorf(services.EINVALID, "attachment %q was not saved", a.Name)
		}
	}
	// The limit bounds what people send; the agent's own answers are
	// stored whatever their length.
	if p.Role == services.RoleUser && len(p.Content) > s.opts.MaxContentBytes {
		return services.Errorf(services.ETOOLARGE, "message text is %d bytes; the limit is %d", len(p.Content), s.opts.MaxContentBytes)
	}
	if strings.IndexByte(p.Content, 0) >= 0 {
		return services.Errorf(services.EINVALID, "message text contains a NUL character, which cannot be stored")
	}
	return nil
}

// Timeline returns visible messages of a timeline: after AfterID
// (ascending), or the newest page before BeforeID (0 = the latest).
// Errors: EINVALID for a bad limit or no timeline.
func (s *Service) Timeline(ctx context.Context, timeline string, beforeID, afterID int64, limit int) (services.TimelinePage, error) {
	if afterID > 0 {
		return s.TimelineAfter(ctx, timeline, afterID, limit)
	}
	limit, err := pageLimit(limit)
	if err != nil {
		return services.TimelinePage{}, err
	}
	if beforeID < 0 {
		return services.TimelinePage{}, services.Errorf(services.EINVALID, "before and after must be positive ids")
	}
	q := services.TimelineQuery{TimelineScope: timeline, BeforeID: beforeID, Limit: limit + 1}
	if q.BeforeID == 0 {
		q.BeforeID = 1<<63 - 1
	}
	msgs, err := s.opts.Store.ListTimeline(ctx, q)
	if err != nil {
		return services.TimelinePage{}, err
	}
	page := services.TimelinePage{Timeline: timeline, PageLimit: limit}
	if len(msgs) > limit {
		msgs = msgs[1:] // the extra row is the oldest: older rows exist
		page.HasOlder = true
	}
	return withBounds(page, msgs), nil
}

// TimelineAfter returns the first limit visible messages after afterID,
// ascending; afterID 0 reads from the timeline's first message.
func (s *Service) TimelineAfter(ctx context.Context, timeline string, afterID int64, limit int) (services.TimelinePage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return services.TimelinePage{}, err
	}
	if afterID < 0 {
		return services.TimelinePage{}, services.Errorf(services.EINVALID, "before and after must be positive ids")
	}
	msgs, err := s.opts.Store.ListTimeline(ctx, services.TimelineQuery{TimelineScope: timeline, AfterID: afterID, Limit: limit})
	if err != nil {
		return services.TimelinePage{}, err
	}
	return withBounds(services.TimelinePage{Timeline: timeline, PageLimit: limit}, msgs), nil
}

func pageLimit(limit int) (int, error) {
	if limit <= 0 {
		return 50, nil
	}
	if limit > 500 {
		return 0, services.Errorf(services.EINVALID, "limit %d is over 500", limit)
	}
	return limit, nil
}

func withBounds(page services.TimelinePage, msgs []services.Message) services.TimelinePage {
	page.Messages = msgs
	if len(msgs) > 0 {
		page.OldestID, page.NewestID = msgs[0].ID, msgs[len(msgs)-1].ID
	}
	return page
}
