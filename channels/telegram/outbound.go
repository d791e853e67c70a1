package telegram

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// OutboundPayload is one Telegram delivery in the outbound queue: Markdown
// text for a chat, optionally as a reply to one of its messages.
type OutboundPayload struct {
	// Key is the outbound job's key; sent chunks are recorded under it.
	Key              string `json:"key"`
	ChatID           int64  `json:"chat_id"`
	ReplyToMessageID int    `json:"reply_to_message_id,omitempty"`
	Text             string `json:"text"`
	// Timeline is where the answered message lives: a chunk that cannot be
	// delivered is reported there too (empty for notices).
	Timeline string `json:"timeline,omitempty"`
	// ReplyTo is the timeline id of the answered message.
	ReplyTo int64 `json:"reply_to,omitempty"`
	// Files are sent first (sendPhoto or sendDocument, read from Timeline's
	// workspace), the text's first MaxCaptionLen characters as the first
	// file's caption and the rest as messages.
	Files []services.FileRef `json:"files,omitempty"`
}

func enqueue(ctx context.Context, q services.OutboundQueue, p OutboundPayload) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	// One lane per chat: what goes to a chat goes in timeline order.
	return q.EnqueueOutbound(ctx, services.Outbound{Channel: Channel, Key: p.Key, Lane: fmt.Sprintf("chat:%d", p.ChatID), Payload: b})
}

// Router is the services.ReplyRouter of the telegram source: it schedules a
// reply for delivery to the chat the answered message came from. It needs
// only the outbound queue, so ChatService can be built before the bot.
type Router struct {
	Queue services.OutboundQueue
	// OwnerChats are the owner's private chats (their user ids), where
	// messages nobody asked for (schedules' notifications) go.
	OwnerChats []int64
}

var (
	_ services.ReplyRouter = Router{}
	_ services.Notifier    = Router{}
)

// NotifyOwner enqueues msg for the chats of its timeline: the owner's
// chats for the owner's timeline, the user's private chat for a Telegram
// user's own timeline ("tg:<id>"); keyed by the message's id (enqueueing it
// again after a crash does nothing).
func (r Router) NotifyOwner(ctx context.Context, msg services.Message) error {
	chats := r.OwnerChats
	if msg.TimelineScope != services.DefaultTimeline {
		id, err := strconv.ParseInt(strings.TrimPrefix(msg.TimelineScope, "tg:"), 10, 64)
		if err != nil || !strings.HasPrefix(msg.TimelineScope, "tg:") {
			return nil // not a Telegram user's timeline
		}
		chats = []int64{id}
	}
	for _, chat := range chats {
		if err := enqueue(ctx, r.Queue, OutboundPayload{
			Key: fmt.Sprintf("notify:%d:%d", msg.ID, chat), ChatID: chat, Text: msg.Content, Timeline: msg.TimelineScope,
			Files: filesOf(msg),
		}); err != nil {
			return err
		}
	}
	return nil
}

// RouteReply enqueues reply for the chat of to, keyed by the reply's id
// (enqueueing it again after a crash does nothing). EINVALID when to carries
// no Telegram chat id.
func (r Router) RouteReply(ctx context.Context, to services.Message, reply services.Message) error {
	meta, _ := services.DecodeMeta(to.Metadata)
	if meta.ChatID == 0 {
		return services.Errorf(services.EINVALID, "message %d has no Telegram chat id", to.ID)
	}
	return enqueue(ctx, r.Queue, OutboundPayload{
		Key:              fmt.Sprintf("reply:%d", reply.ID),
		ChatID:           meta.ChatID,
		ReplyToMessageID: meta.MessageID,
		Text:             reply.Content,
		Timeline:         to.TimelineScope,
		ReplyTo:          to.ID,
		Files:            filesOf(reply),
	})
}

// filesOf is the files a message carries, from its metadata.
func filesOf(m services.Message) []services.FileRef {
	meta, _ := services.DecodeMeta(m.Metadata)
	return meta.Files
}

// Deliver is the channel's services.OutboundHandler: it renders the text,
// splits it into messages of at most MaxMessageLen and sends them in order,
// skipping chunks already sent by an earlier attempt, so a retry never sends
// a chunk twice. Telegram's 429 becomes a *services.RetryAfterError. Errors a
// retry cannot fix (the user blocked the bot, the chat is gone) are logged
// and the delivery is dropped.
func (b *Bot) Deliver(ctx context.Context, payload json.RawMessage) error {
	var p OutboundPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		b.log.Error("telegram delivery: bad payload", "err", err)
		return nil
	}
	sent, err := b.opts.Store.SentChunks(ctx, p.Key)
	if err != nil {
		return err
	}
	replyTo := p.ReplyToMessageID
	for i, it := range b.items(p) {
		if it.send == nil {
			continue // a blank chunk
		}
		if sent[i] {
			replyTo = 0
			continue
		}
		// The send is recorded before it is made: a crash or a timeout
		// before Telegram's answer leaves it in flight, and such a chunk is
		// sent again at most once.
		inFlight, err := b.opts.Store.BeginChunk(ctx, p.Key, i)
		if err != nil {
			return err
		}
		if inFlight > 2 {
			b.log.Error("telegram: chunk not sent a third time: two sends of it had no answer", "key", p.Key, "chat_id", p.ChatID, "chunk", i)
			if err := b.undeliverable(ctx, p, i); err != nil {
				return err
			}
			if err := b.opts.Store.MarkChunkSent(ctx, p.Key, i, 0); err != nil {
				return err
			}
			continue
		}
		if inFlight == 2 {
			b.log.Warn("telegram: resending a chunk whose first send had no answer (it may show twice)", "key", p.Key, "chat_id", p.ChatID, "chunk", i)
			if b.opts.SendError != nil {
				b.opts.SendError("resent")
			}
		}
		m, err := it.send(ctx, replyTo, false)
		if err != nil && errors.Is(err, bot.ErrorBadRequest) && it.html {
			// Telegram could not parse this chunk's entities: send its
			// visible text without formatting rather than lose it.
			b.countSendError(err)
			b.log.Warn("telegram: chunk refused as HTML, resending as plain text", "key", p.Key, "chunk", i, "err", err)
			m, err = it.send(ctx, replyTo, true)
		}
		if err != nil {
			b.countSendError(err)
			if refused(err) {
				if err := b.opts.Store.AbortChunk(ctx, p.Key, i); err != nil {
					return err
				}
			}
		}
		var tooMany *bot.TooManyRequestsError
		switch {
		case errors.As(err, &tooMany):
			return &services.RetryAfterError{Delay: time.Duration(max(tooMany.RetryAfter, 1)) * time.Second}
		case errors.Is(err, bot.ErrorForbidden), errors.Is(err, bot.ErrorNotFound):
			b.log.Error("telegram delivery dropped", "key", p.Key, "chat_id", p.ChatID, "chunk", i, "err", err)
			return nil
		case errors.Is(err, bot.ErrorBadRequest), services.IsKind(err, services.ENOTFOUND), services.IsKind(err, services.ETOOLARGE):
			// Not even as plain text (or a file that is gone or too large
			// for Telegram): say so where the owner looks, and go on with
			// the rest of the answer.
			b.log.Error("telegram: chunk not deliverable", "key", p.Key, "chat_id", p.ChatID, "chunk", i, "err", err)
			if err := b.undeliverable(ctx, p, i); err != nil {
				return err
			}
			if err := b.opts.Store.MarkChunkSent(ctx, p.Key, i, 0); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("telegram: send chunk %d of %s: %w", i, p.Key, err)
		}
		if err := b.opts.Store.MarkChunkSent(ctx, p.Key, i, int64(m.ID)); err != nil {
			return err
		}
		replyTo = 0
	}
	return nil
}

// item is one message of a delivery: a text chunk or a file (nil send: a
// blank chunk, which Telegram would refuse).
type item struct {
	// html: the item carries formatted text that may be resent plain.
	html bool
	send func(ctx context.Context, replyTo int, plain bool) (*models.Message, error)
}

// items are a delivery's messages in order, numbered as its chunks: the
// files first (the first with the text's start as its caption), then the
// text in chunks of at most MaxMessageLen.
func (b *Bot) items(p OutboundPayload) []item {
	var out []item
	text := p.Text
	for fi, f := range p.Files {
		caption := ""
		if fi == 0 && text != "" {
			parts := Split(text, MaxCaptionLen)
			caption = parts[0].HTML
			text = ""
			for _, c := range parts[1:] {
				text += c.Source
			}
		}
		out = append(out, item{html: caption != "", send: func(ctx context.Context, replyTo int, plain bool) (*models.Message, error) {
			return b.sendFile(ctx, p, f, caption, replyTo, plain)
		}})
	}
	for _, ch := range Split(text, MaxMessageLen) {
		if strings.TrimSpace(visibleText(ch.HTML)) == "" {
			out = append(out, item{}) // Telegram rejects blank messages
			continue
		}
		out = append(out, item{html: true, send: func(ctx context.Context, replyTo int, plain bool) (*models.Message, error) {
			params := &bot.SendMessageParams{
				ChatID:             p.ChatID,
				Text:               ch.HTML,
				ParseMode:          models.ParseModeHTML,
				LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: bot.True()},
			}
			if plain {
				params.Text, params.ParseMode = visibleText(ch.HTML), ""
			}
			if replyTo != 0 {
				params.ReplyParameters = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
			}
			return b.send(ctx, params)
		}})
	}
	return out
}

// send is one sendMessage, bounded by SendTimeout: a call Telegram holds
// fails (and the delivery is retried) instead of holding the chat's
// deliveries for as long as the server likes.
func (b *Bot) send(ctx context.Context, params *bot.SendMessageParams) (*models.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.SendTimeout)
	defer cancel()
	return b.api.SendMessage(ctx, params)
}

// undeliverable tells the user that part chunk of p could not be sent: in
// the chat (a short plain message, keyed so a retry sends it once) and on
// the timeline (a visible system message, where the whole answer is).
func (b *Bot) undeliverable(ctx context.Context, p OutboundPayload, chunk int) error {
	text := fmt.Sprintf("Part %d of this answer could not be delivered on Telegram (Telegram refused it). The whole answer is on the web page and in the terminal client.", chunk+1)
	if p.Timeline != "" {
		if _, _, err := b.opts.Chat.Post(ctx, services.PostParams{
			TimelineScope: p.Timeline, Source: services.SourceSystem, Role: services.RoleAssistant, Content: text,
			DedupeKey: fmt.Sprintf("undeliverable:%s:%d", p.Key, chunk),
			Metadata:  services.MessageMeta{ReplyTo: p.ReplyTo, Notice: "undeliverable"}.Encode(),
		}); err != nil {
			return err
		}
	}
	return enqueue(ctx, b.opts.Queue, OutboundPayload{Key: fmt.Sprintf("undeliverable:%s:%d", p.Key, chunk), ChatID: p.ChatID, Text: text})
}

// refused reports whether Telegram answered a call with an error, so the
// call did nothing (unlike a timeout or a broken connection, after which
// the message may or may not be in the chat).
func refused(err error) bool {
	var tooMany *bot.TooManyRequestsError
	return errors.As(err, &tooMany) || errors.Is(err, bot.ErrorBadRequest) || errors.Is(err, bot.ErrorForbidden) ||
		errors.Is(err, bot.ErrorNotFound) || errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorConflict)
}

// countSendError reports a failed send to the metrics by code.
func (b *Bot) countSendError(err error) {
	if b.opts.SendError == nil {
		return
	}
	var tooMany *bot.TooManyRequestsError
	code := "network"
	switch {
	case errors.As(err, &tooMany):
		code = "429"
	case errors.Is(err, bot.ErrorForbidden):
		code = "403"
	case errors.Is(err, bot.ErrorBadRequest):
		code = "400"
	case errors.Is(err, bot.ErrorNotFound):
		code = "404"
	}
	b.opts.SendError(code)
}

// pairingAlphabet leaves out look-alikes (0/O, 1/I/L).
const pairingAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// NewPairingCode returns a random 6-character pairing code.
func NewPairingCode() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = pairingAlphabet[int(b[i])%len(pairingAlphabet)]
	}
	return string(b[:])
}
