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
	// ApprovalID, for an approval request, puts Approve / Deny buttons
	// under its last message; the request is delivered under the key
	// approvalKey(ApprovalID, ChatID).
	ApprovalID int64 `json:"approval_id,omitempty"`
	// Decided, for the notice of an approval's decision, is that approval:
	// its request is edited to show the decision, without its buttons,
	// before the notice is sent.
	Decided int64 `json:"decided,omitempty"`
	// PairingCode, for a stranger's pairing request sent to the owner,
	// puts Approve / Deny buttons under its last message.
	PairingCode string `json:"pairing_code,omitempty"`
	// PairingDecided, with PairingOutcome and no Text, edits the pairing
	// request with that code in this chat to end with the outcome, without
	// its buttons (Desk.tell; nothing is sent).
	PairingDecided string `json:"pairing_decided,omitempty"`
	PairingOutcome string `json:"pairing_outcome,omitempty"`
	// Speak, for the answer to a voice question, sends the text spoken
	// as a voice note (sendVoice) after it, when the bot has a speaker;
	// the voice note is the delivery's last item. A speech service that
	// fails is logged and the voice note left out: the text still arrives.
	Speak bool `json:"speak,omitempty"`
}

// approvalKey is the delivery key of approval id's request to chat.
func approvalKey(id, chat int64) string {
	return fmt.Sprintf("approval:%d:%d", id, chat)
}

func enqueue(ctx context.Context, q services.OutboundQueue, p OutboundPayload) error {
	o, err := outbound(p)
	if err != nil {
		return err
	}
	return q.EnqueueOutbound(ctx, o)
}

// enqueueTx is enqueue in tx: the delivery commits with it.
func enqueueTx(ctx context.Context, tx services.Tx, q services.OutboundQueue, p OutboundPayload) error {
	o, err := outbound(p)
	if err != nil {
		return err
	}
	return q.EnqueueOutboundTx(ctx, tx, o)
}

func outbound(p OutboundPayload) (services.Outbound, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return services.Outbound{}, err
	}
	// One lane per chat: what goes to a chat goes in timeline order.
	return services.Outbound{Channel: Channel, Key: p.Key, Lane: fmt.Sprintf("chat:%d", p.ChatID), Payload: b}, nil
}

// Router is the services.ReplyRouter of the telegram source: it schedules a
// reply for delivery to the chat the answered message came from. It needs
// only the outbound queue, so ChatService can be built before the bot.
type Router struct {
	Queue services.OutboundQueue
	// OwnerChats are the owner's private chats (their user ids), where
	// messages nobody asked for (schedules' notifications) go.
	OwnerChats []int64
	// Speak: a speech service is configured, so the agent's answer to a
	// voice note is spoken too unless the chat turned it off (/voice off,
	// read in the reply's transaction).
	Speak bool
}

var (
	_ services.ReplyRouter = Router{}
	_ services.Notifier    = Router{}
)

// NotifyOwnerTx enqueues msg, in tx, for the chats of its timeline: the
// owner's chats for the owner's timeline, the user's private chat for a
// Telegram user's own timeline ("tg:<id>"); keyed by the message's id
// (enqueueing it again after a crash does nothing).
func (r Router) NotifyOwnerTx(ctx context.Context, tx services.Tx, msg services.Message) error {
	chats := r.OwnerChats
	if msg.TimelineScope != services.DefaultTimeline {
		id, err := strconv.ParseInt(strings.TrimPrefix(msg.TimelineScope, "tg:"), 10, 64)
		if err != nil || !strings.HasPrefix(msg.TimelineScope, "tg:") {
			return nil // not a Telegram user's timeline
		}
		chats = []int64{id}
	}
	var approval, decided int64
	if msg.TimelineScope == services.DefaultTimeline {
		switch msg.Meta.Notice {
		case "approval":
			approval = msg.Meta.ApprovalID
		case "approval_decided":
			decided = msg.Meta.ApprovalID
		}
	}
	for _, chat := range chats {
		key := fmt.Sprintf("notify:%d:%d", msg.ID, chat)
		if approval != 0 {
			key = approvalKey(approval, chat)
		}
		if err := enqueueTx(ctx, tx, r.Queue, OutboundPayload{
			Key: key, ChatID: chat, Text: msg.Content, Timeline: msg.TimelineScope,
			Files: filesOf(msg), ApprovalID: approval, Decided: decided,
		}); err != nil {
			return err
		}
	}
	return nil
}

// RouteReplyTx enqueues reply, in tx, for the chat of to, keyed by the
// reply's id (enqueueing it again after a crash does nothing). EINVALID
// when to carries no Telegram chat id.
func (r Router) RouteReplyTx(ctx context.Context, tx services.Tx, to services.Message, reply services.Message) error {
	meta := to.Meta
	if meta.ChatID == 0 {
		return services.Errorf(services.EINVALID, "message %d has no Telegram chat id", to.ID)
	}
	speak, err := r.speaks(ctx, tx, to, reply)
	if err != nil {
		return err
	}
	return enqueueTx(ctx, tx, r.Queue, OutboundPayload{
		Key:              fmt.Sprintf("reply:%d", reply.ID),
		ChatID:           meta.ChatID,
		ReplyToMessageID: meta.MessageID,
		Text:             reply.Content,
		Timeline:         to.TimelineScope,
		ReplyTo:          to.ID,
		Files:            filesOf(reply),
		Speak:            speak,
	})
}

// speaks reports whether reply, the agent's answer to to, is spoken too:
// to is a voice note, a speech service is configured and the chat did not
// turn spoken replies off.
func (r Router) speaks(ctx context.Context, tx services.Tx, to, reply services.Message) (bool, error) {
	if !r.Speak || reply.Source != services.SourceAgent || strings.TrimSpace(reply.Content) == "" || !voiceQuestion(to) {
		return false, nil
	}
	return tx.VoiceRepliesOn(ctx, services.SourceTelegram, to.Meta.ChatID)
}

// voiceQuestion reports whether m came as a voice note.
func voiceQuestion(m services.Message) bool {
	for _, f := range m.Meta.Files {
		if f.Kind == services.AttachVoice {
			return true
		}
	}
	return false
}

// filesOf is the files a message carries, from its metadata.
func filesOf(m services.Message) []services.FileRef {
	return m.Meta.Files
}

// Deliver is the channel's services.OutboundHandler: it renders the text,
// splits it into messages of at most MaxMessageLen and sends them in order,
// skipping chunks already sent by an earlier attempt, so a retry never sends
// a chunk twice. A send Telegram did not take (a server error, a proxy's
// 502 page, no connection) is retried with backoff, and then the delivery
// is retried by the queue; Telegram's 429 becomes a
// *services.RetryAfterError. Errors a retry cannot fix (the user blocked the
// bot, the chat is gone) are logged and the delivery is dropped.
func (b *Bot) Deliver(ctx context.Context, payload json.RawMessage) error {
	var p OutboundPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		b.log.Error("telegram delivery: bad payload", "err", err)
		return nil
	}
	if p.Decided != 0 {
		if err := b.showDecided(ctx, p); err != nil {
			return err
		}
	}
	if p.PairingDecided != "" {
		return b.showPairingDecided(ctx, p)
	}
	done, err := b.opts.Store.SentChunks(ctx, p.Key)
	if err != nil {
		return err
	}
	d := &delivery{p: p, replyTo: p.ReplyToMessageID}
	for i, it := range b.items(p) {
		if it.send == nil {
			continue // a blank chunk
		}
		if done[i] {
			d.replyTo = 0
			continue
		}
		if it.speak {
			var ok bool
			if it, ok, err = b.spoken(ctx, p, i); err != nil || !ok {
				return err
			}
		}
		if err := b.deliverItem(ctx, d, i, it); err != nil {
			if errors.Is(err, errDropped) {
				return nil
			}
			return err
		}
	}
	return nil
}

// delivery is the state of one Deliver call.
type delivery struct {
	p OutboundPayload
	// replyTo is the message the next item answers (only the first does).
	replyTo int
	// prev is the id of the message this call sent last (0: none yet).
	prev int64
}

// errDropped ends a delivery that cannot reach the chat.
var errDropped = errors.New("delivery dropped")

// maxSendAttempts bounds the sends of one item in one Deliver call while
// Telegram answers with server errors; the queue retries the delivery
// after that.
const maxSendAttempts = 6

// deliverItem sends item i of d until it is sent or reported undeliverable.
// Every send is recorded before it is made (BeginChunk): a crash or a send
// without an answer leaves it in flight. A chunk whose earlier send had no
// answer is looked for in the chat when it can be (findSent) and sent
// again only when it is not there; when it cannot be looked for it is sent
// again at most once.
func (b *Bot) deliverItem(ctx context.Context, d *delivery, i int, it item) error {
	p := d.p
	wait := b.opts.RetryBackoff
	for attempt := 1; ; attempt++ {
		inFlight, err := b.opts.Store.BeginChunk(ctx, p.Key, i)
		if err != nil {
			return err
		}
		if inFlight >= 2 {
			id, found, known, err := b.lookFor(ctx, d, it)
			if err != nil {
				return errors.Join(err, b.opts.Store.AbortChunk(ctx, p.Key, i))
			}
			switch {
			case found:
				b.log.Info("telegram: a chunk whose send had no answer is in the chat; not sent again", "key", p.Key, "chunk", i, "message_id", id)
				return b.sentAs(ctx, d, i, id)
			case !known && inFlight > 2:
				b.log.Error("telegram: chunk not sent a third time: two sends of it had no answer", "key", p.Key, "chat_id", p.ChatID, "chunk", i)
				return b.giveUp(ctx, d, i, "Telegram did not answer when it was sent, twice; it may have arrived")
			case !known:
				b.log.Warn("telegram: resending a chunk whose first send had no answer (it may show twice)", "key", p.Key, "chat_id", p.ChatID, "chunk", i)
				if b.opts.SendError != nil {
					b.opts.SendError("resent")
				}
			}
		}
		m, oc, err := b.sendItem(ctx, p, i, it, d.replyTo)
		if oc == sent {
			return b.sentAs(ctx, d, i, int64(m.ID))
		}
		if oc != unknown {
			if err := b.opts.Store.AbortChunk(ctx, p.Key, i); err != nil {
				return err
			}
		}
		switch oc {
		case refused:
			return b.refusedItem(ctx, d, i, err)
		case notSent:
			if attempt >= maxSendAttempts || ctx.Err() != nil {
				return fmt.Errorf("telegram: send chunk %d of %s: %w", i, p.Key, err)
			}
			b.log.Warn("telegram: send failed, Telegram did not take it; retrying", "key", p.Key, "chunk", i, "attempt", attempt, "in", wait, "err", err)
			sleep(ctx, wait)
			wait *= 2
		case unknown:
			if ctx.Err() != nil || attempt >= maxSendAttempts {
				return fmt.Errorf("telegram: send chunk %d of %s: %w", i, p.Key, err)
			}
			b.log.Warn("telegram: send had no answer", "key", p.Key, "chunk", i, "err", err)
		}
	}
}

// lookFor looks in the chat for item it, whose last send had no answer:
// possible for a text chunk sent after another message of this call.
func (b *Bot) lookFor(ctx context.Context, d *delivery, it item) (id int64, found, known bool, err error) {
	if d.prev == 0 || it.text == "" {
		return 0, false, false, nil
	}
	return b.findSent(ctx, d.p.ChatID, d.prev, it.text)
}

// sentAs records item i as sent as message id.
func (b *Bot) sentAs(ctx context.Context, d *delivery, i int, id int64) error {
	if err := b.opts.Store.MarkChunkSent(ctx, d.p.Key, i, id); err != nil {
		return err
	}
	d.replyTo, d.prev = 0, id
	return nil
}

// giveUp reports item i undeliverable (why is the user's to read) and goes
// on with the rest of the delivery.
func (b *Bot) giveUp(ctx context.Context, d *delivery, i int, why string) error {
	if err := b.undeliverable(ctx, d.p, i, why); err != nil {
		return err
	}
	return b.opts.Store.MarkChunkSent(ctx, d.p.Key, i, 0)
}

// refusedItem handles a send Telegram refused.
func (b *Bot) refusedItem(ctx context.Context, d *delivery, i int, err error) error {
	p := d.p
	var tooMany *bot.TooManyRequestsError
	switch {
	case errors.As(err, &tooMany):
		return &services.RetryAfterError{Delay: time.Duration(max(tooMany.RetryAfter, 1)) * time.Second}
	case errors.Is(err, bot.ErrorForbidden), errors.Is(err, bot.ErrorNotFound):
		b.log.Error("telegram delivery dropped", "key", p.Key, "chat_id", p.ChatID, "chunk", i, "err", err)
		return errDropped
	case errors.Is(err, bot.ErrorBadRequest):
		// Not even as plain text: say so where the owner looks, and go on
		// with the rest of the answer.
		b.log.Error("telegram: chunk not deliverable", "key", p.Key, "chat_id", p.ChatID, "chunk", i, "err", err)
		return b.giveUp(ctx, d, i, "Telegram refused it")
	}
	return fmt.Errorf("telegram: send chunk %d of %s: %w", i, p.Key, err)
}

// sendItem sends it once (as plain text again when Telegram cannot parse its
// HTML). A file that is gone or too large for Telegram is refused.
func (b *Bot) sendItem(ctx context.Context, p OutboundPayload, i int, it item, replyTo int) (*models.Message, outcome, error) {
	m, oc, err := b.call(ctx, func(ctx context.Context) (*models.Message, error) { return it.send(ctx, replyTo, false) })
	if oc == refused && errors.Is(err, bot.ErrorBadRequest) && it.html {
		// Telegram could not parse this chunk's entities: send its
		// visible text without formatting rather than lose it.
		b.countSendError(err)
		b.log.Warn("telegram: chunk refused as HTML, resending as plain text", "key", p.Key, "chunk", i, "err", err)
		m, oc, err = b.call(ctx, func(ctx context.Context) (*models.Message, error) { return it.send(ctx, replyTo, true) })
	}
	if err != nil {
		b.countSendError(err)
	}
	if services.IsKind(err, services.ENOTFOUND) || services.IsKind(err, services.ETOOLARGE) {
		b.log.Error("telegram: file not deliverable", "key", p.Key, "chat_id", p.ChatID, "chunk", i, "err", err)
		return nil, refused, fmt.Errorf("%w, %w", bot.ErrorBadRequest, err)
	}
	return m, oc, err
}

// item is one message of a delivery: a text chunk or a file (nil send: a
// blank chunk, which Telegram would refuse).
type item struct {
	// html: the item carries formatted text that may be resent plain.
	html bool
	// text is a text chunk's HTML ("" for a file).
	text string
	// speak marks the voice note of the text, last: its audio is made by
	// spoken just before it is sent.
	speak bool
	send  func(ctx context.Context, replyTo int, plain bool) (*models.Message, error)
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
	chunks := Split(text, MaxMessageLen)
	for ci, ch := range chunks {
		if strings.TrimSpace(visibleText(ch.HTML)) == "" {
			out = append(out, item{}) // Telegram rejects blank messages
			continue
		}
		out = append(out, item{html: true, text: ch.HTML, send: func(ctx context.Context, replyTo int, plain bool) (*models.Message, error) {
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
			if p.ApprovalID != 0 && ci == len(chunks)-1 {
				params.ReplyMarkup = approvalKeyboard(p.ApprovalID)
			}
			if p.PairingCode != "" && ci == len(chunks)-1 {
				params.ReplyMarkup = pairingKeyboard(p.PairingCode)
			}
			return b.send(ctx, params)
		}})
	}
	if p.Speak && b.opts.Speaker != nil {
		out = append(out, item{speak: true, send: func(context.Context, int, bool) (*models.Message, error) {
			return nil, errors.New("telegram: a voice note sent before it was spoken")
		}})
	}
	return out
}

// send is one sendMessage; its caller (call) bounds it.
func (b *Bot) send(ctx context.Context, params *bot.SendMessageParams) (*models.Message, error) {
	return b.api.SendMessage(ctx, params)
}

// undeliverable tells the user that part chunk of p could not be sent: in
// the chat (a short plain message, keyed so a retry sends it once) and on
// the timeline (a visible system message, where the whole answer is).
func (b *Bot) undeliverable(ctx context.Context, p OutboundPayload, chunk int, why string) error {
	text := fmt.Sprintf("Part %d of this answer could not be delivered on Telegram (%s). The whole answer is on the web page and in the terminal client.", chunk+1, why)
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

// countSendError reports a failed send to the metrics by code.
func (b *Bot) countSendError(err error) {
	if b.opts.SendError == nil {
		return
	}
	var tooMany *bot.TooManyRequestsError
	var status *statusError
	code := "network"
	switch {
	case errors.As(err, &status):
		code = strconv.Itoa(status.status)
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
