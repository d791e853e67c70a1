// Package telegram is the Telegram channel: a thin adapter between the Bot
// API (github.com/go-telegram/bot) and ChatService. Inbound updates arrive by
// long polling (one instance at a time, elected with a PostgreSQL advisory
// lock) or by webhook; each message is stored idempotently through
// ChatService.Post, keyed by chat and message id, so a redelivered update
// never makes a second message or a second agent run. Outbound answers go
// through the durable outbound queue: rendered to Telegram HTML, split into
// messages of at most 4096 characters, each chunk sent once.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// Access policies for senders who are not the owner.
const (
	// PolicyPairing gives an unknown sender a code; the owner approves it.
	PolicyPairing = "pairing"
	// PolicyAllowlist ignores everyone not in the allowed ids.
	PolicyAllowlist = "allowlist"
	// PolicyOpen lets everyone talk, each in their own timeline.
	PolicyOpen = "open"
)

// Channel is the outbound queue's channel name for Telegram deliveries.
const Channel = services.SourceTelegram

// DefaultAPIURL is the official Bot API server.
const DefaultAPIURL = "https://api.telegram.org"

// Poster stores messages: ChatService.
type Poster interface {
	Post(ctx context.Context, p services.PostParams) (services.Message, bool, error)
}

// Store is the channel's state in the database.
type Store interface {
	// LastUpdateID is the last update stored for the bot (0 when none).
	LastUpdateID(ctx context.Context, botID int64) (int64, error)
	// SetLastUpdateID records an update as processed; it never moves back.
	SetLastUpdateID(ctx context.Context, botID, updateID int64) error
	// CommandsHash is the hash of the command menu last set ("" when none).
	CommandsHash(ctx context.Context, botID int64) (string, error)
	// SetCommandsHash records the hash of the command menu just set.
	SetCommandsHash(ctx context.Context, botID int64, hash string) error
	// PairingByUser and RequestPairing keep the pairings of other senders.
	PairingByUser(ctx context.Context, userID int64) (services.Pairing, error)
	RequestPairing(ctx context.Context, p services.Pairing) (services.Pairing, error)
	// SentChunks returns which chunks of an outbound delivery were sent.
	SentChunks(ctx context.Context, outboundKey string) (map[int]bool, error)
	// BeginChunk records that a chunk's send starts and returns how many
	// sends of it began whose outcome is unknown, this one included (2: a
	// send before this one was cut off by a crash or a timeout).
	BeginChunk(ctx context.Context, outboundKey string, index int) (int, error)
	// AbortChunk records that the send begun last was refused, so it does
	// not count as one whose outcome is unknown.
	AbortChunk(ctx context.Context, outboundKey string, index int) error
	// MarkChunkSent records a chunk as sent.
	MarkChunkSent(ctx context.Context, outboundKey string, index int, messageID int64) error
	// LastSentMessage is the Telegram message id of the last chunk of an
	// outbound delivery that reached the chat (0: none did).
	LastSentMessage(ctx context.Context, outboundKey string) (int64, error)
}

// Lease is held by the one instance that long-polls.
type Lease interface {
	// Lost is closed when the lease ended without Release (its database
	// connection dropped).
	Lost() <-chan struct{}
	// Release gives the lease up.
	Release()
}

// Leases hands out the polling lease.
type Leases interface {
	// TryLease takes the named lease; nil and no error when another
	// instance holds it.
	TryLease(ctx context.Context, name string) (Lease, error)
}

// Config are the channel's settings: what the environment sets
// (cmd/switchboard's env table), nothing built; zero durations take their
// defaults.
type Config struct {
	// Token is the bot token from BotFather.
	Token string
	// APIURL is the Bot API base URL (default DefaultAPIURL).
	APIURL string
	// OwnerIDs are the owner's Telegram user ids: they write to the owner's
	// timeline (services.DefaultTimeline).
	OwnerIDs []int64
	// Policy for other senders: PolicyPairing (default), PolicyAllowlist or PolicyOpen.
	Policy string
	// AllowedIDs may talk (each in their own timeline) without pairing.
	AllowedIDs []int64
	// GroupIDs are the group chats the bot answers in; there only messages
	// that mention the bot (or reply to it) count.
	GroupIDs []int64
	// BotUsername is the bot's @username without the @, for mentions; empty:
	// asked with getMe at start.
	BotUsername string
	// LogContent allows message text in logs (LOG_CONTENT).
	LogContent bool

	// PollTimeout is the long-poll timeout of getUpdates (default 25s).
	PollTimeout time.Duration
	// PollIdle is the pause after an empty answer that came back at once
	// (servers that ignore the timeout); default 1s.
	PollIdle time.Duration
	// LeaderRetry is how often a non-leader tries to take the polling lease
	// (default 3s).
	LeaderRetry time.Duration
	// SendTimeout bounds one Bot API call other than getUpdates (default
	// 30s): a call Telegram holds longer fails and is retried. For a call
	// that sends a message it bounds the time until the request is
	// written; the wait for the answer after that is AnswerTimeout.
	SendTimeout time.Duration
	// AnswerTimeout bounds the wait for the answer to a send whose request
	// was written (default 2 min): giving up on it leaves its outcome
	// unknown, so it is waited for longer than a new call.
	AnswerTimeout time.Duration
	// RetryBackoff is the first wait before a send Telegram did not take
	// is tried again, and before an update whose handling failed is handled
	// again; it doubles each time (default 1s).
	RetryBackoff time.Duration
	// PairingTTL is how long a pairing code is valid (default 1h).
	PairingTTL time.Duration
	// TypingEvery is the period of the "typing" indicator (default 4s; see
	// Typing).
	TypingEvery time.Duration
}

// Deps are the channel's collaborators. Chat, Store and Queue are
// required; each other one is a capability: given, the feature it backs is
// on; nil, it is off and the channel says so.
type Deps struct {
	Chat  Poster
	Store Store
	Queue services.OutboundQueue
	// Leases elect the one instance that polls (RunPolling needs them).
	Leases Leases
	// HTTPClient makes the Bot API calls (nil: a default client).
	HTTPClient *http.Client
	// Media stores the files of photos, documents, voice notes, audio and
	// video notes (downloaded with getFile); nil: such messages keep only
	// their caption, and without one the sender hears they are not
	// supported.
	Media services.Media
	// Speaker speaks the answers whose delivery asks for it
	// (OutboundPayload.Speak) as voice notes; nil: text only.
	Speaker services.Speaker
	// Approvals decides an approval when the owner presses its Approve or
	// Deny button (nil: the buttons answer that approvals are unavailable).
	Approvals services.ApprovalDecider
	// Pairings decides pairings when the owner presses a request's
	// buttons (the Desk, which tells the stranger); nil: the buttons say
	// pairings are not available.
	Pairings services.Pairings
	// Audit records pairing requests (nil: not recorded).
	Audit  services.AuditLog
	Logger *slog.Logger
	// SendError, when set, counts a failed send by code ("429", "403",
	// "400", "404", an HTTP status such as "502", "network") for the
	// metrics.
	SendError func(code string)
}

// options are what the channel reads: its collaborators and settings.
type options struct {
	Deps
	Config
}

// Bot is the Telegram channel of one bot.
type Bot struct {
	opts  options
	api   *bot.Bot
	botID int64
	// username is the bot's @username (for mentions in groups), learned
	// from getMe; meMu guards it and when getMe was last tried.
	meMu     sync.Mutex
	username string
	meTried  time.Time
	log      *slog.Logger
	owners   map[int64]bool
	allowed  map[int64]bool
	groups   map[int64]bool
	leader   atomic.Bool
	// failures counts the failed attempts of updates not confirmed yet.
	failures updateFailures
}

// New builds the channel. It asks getMe for the bot's username (used to
// recognise mentions in groups) unless Config.BotUsername is set; a failed
// getMe is logged, not fatal, so a Telegram outage does not stop the service.
func New(ctx context.Context, d Deps, cfg Config) (*Bot, error) {
	opts := options{Deps: d, Config: cfg}
	if opts.Token == "" {
		return nil, errors.New("telegram: no bot token")
	}
	if opts.Chat == nil || opts.Store == nil || opts.Queue == nil {
		return nil, errors.New("telegram: Chat, Store and Queue are required")
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	opts.APIURL = strings.TrimRight(opts.APIURL, "/")
	if opts.Policy == "" {
		opts.Policy = PolicyPairing
	}
	switch opts.Policy {
	case PolicyPairing, PolicyAllowlist, PolicyOpen:
	default:
		return nil, fmt.Errorf("telegram: unknown policy %q", opts.Policy)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 25 * time.Second
	}
	if opts.PollIdle <= 0 {
		opts.PollIdle = time.Second
	}
	if opts.LeaderRetry <= 0 {
		opts.LeaderRetry = 3 * time.Second
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 30 * time.Second
	}
	if opts.AnswerTimeout <= 0 {
		opts.AnswerTimeout = 2 * time.Minute
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = time.Second
	}
	if opts.PairingTTL <= 0 {
		opts.PairingTTL = time.Hour
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	log := opts.Logger.With("component", "telegram")
	api, err := bot.New(opts.Token,
		bot.WithServerURL(opts.APIURL),
		bot.WithSkipGetMe(),
		bot.WithHTTPClient(opts.PollTimeout+15*time.Second, tracedClient(opts.HTTPClient)),
		bot.WithErrorsHandler(func(err error) { log.Warn("bot api", "err", err) }),
		bot.WithDefaultHandler(func(context.Context, *bot.Bot, *models.Update) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	b := &Bot{
		opts: opts, api: api, botID: api.ID(), username: strings.TrimPrefix(opts.BotUsername, "@"), log: log,
		owners: idSet(opts.OwnerIDs), allowed: idSet(opts.AllowedIDs), groups: idSet(opts.GroupIDs),
	}
	if b.botID == 0 {
		return nil, errors.New("telegram: the bot token should look like 123456:ABC…")
	}
	if _, err := b.botUsername(ctx); err != nil {
		log.Warn("getMe failed; group messages wait (unconfirmed) until it succeeds", "err", err)
	}
	return b, nil
}

// getMeRetry is the least time between two getMe calls while it fails.
const getMeRetry = 5 * time.Second

// botUsername returns the bot's username, asking getMe when it is not known
// yet (at most once per getMeRetry while it fails). An error means group
// messages cannot be checked for a mention yet: the caller leaves the update
// unconfirmed, so Telegram delivers it again.
func (b *Bot) botUsername(ctx context.Context) (string, error) {
	b.meMu.Lock()
	defer b.meMu.Unlock()
	if b.username != "" {
		return b.username, nil
	}
	if !b.meTried.IsZero() && time.Since(b.meTried) < getMeRetry {
		return "", services.Errorf(services.EUNAVAILABLE, "the bot's username is not known yet (getMe failed %s ago)", time.Since(b.meTried).Round(time.Second))
	}
	b.meTried = time.Now()
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	me, err := b.api.GetMe(gctx)
	cancel()
	if err != nil || me == nil || me.Username == "" {
		if err == nil {
			err = errors.New("getMe returned no username")
		}
		return "", &services.Error{Kind: services.EUNAVAILABLE, Message: "getMe failed: the bot's username is not known yet", Err: err}
	}
	b.username = me.Username
	return b.username, nil
}

func idSet(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// BotID is the numeric id of the bot (the token's prefix).
func (b *Bot) BotID() int64 { return b.botID }

// TimelineOf returns the timeline a Telegram user writes to: the owner's,
// or their own "tg:<user id>".
func (b *Bot) TimelineOf(userID int64) string {
	if b.owners[userID] {
		return services.DefaultTimeline
	}
	return UserTimeline(userID)
}

// UserTimeline is the timeline of a non-owner Telegram user.
func UserTimeline(userID int64) string { return "tg:" + strconv.FormatInt(userID, 10) }

// HandleUpdate stores the message of one update (new or edited) if its
// sender may talk, and answers what cannot reach the agent (pairing codes,
// unsupported media). Redelivering an update is harmless. An error means
// the update should be delivered again (the database is unavailable).
func (b *Bot) HandleUpdate(ctx context.Context, upd *models.Update) error {
	if upd.CallbackQuery != nil {
		return b.handleCallback(ctx, upd.CallbackQuery)
	}
	msg, edited := upd.Message, false
	if msg == nil && upd.EditedMessage != nil {
		msg, edited = upd.EditedMessage, true
	}
	if msg == nil || msg.From == nil || msg.From.IsBot {
		return nil // other update kinds, channel posts, bots
	}
	group := msg.Chat.Type == models.ChatTypeGroup || msg.Chat.Type == models.ChatTypeSupergroup
	if !group && msg.Chat.Type != models.ChatTypePrivate {
		return nil
	}
	text, caption := msg.Text, false
	if text == "" && msg.Caption != "" {
		text, caption = msg.Caption, true
	}
	if group {
		if !b.groups[msg.Chat.ID] {
			b.log.Debug("ignored message from a group not in TELEGRAM_GROUPS", "chat_id", msg.Chat.ID)
			return nil
		}
		var ok bool
		var err error
		if text, ok, err = b.addressed(ctx, msg, text); err != nil || !ok {
			return err
		}
	}
	timeline, ok, err := b.access(ctx, msg, group, edited)
	if err != nil || !ok {
		return err
	}
	key := dedupeKey(upd.ID, msg, edited)
	var files []services.Attachment
	if f := b.inboundFile(msg); f != nil && !edited {
		a, err := b.fetch(ctx, timeline, f)
		if err != nil {
			switch services.ErrorKind(err) {
			case services.EINVALID, services.ETOOLARGE:
				return b.notice(ctx, msg, "rejected:"+key, services.ErrorMessage(err))
			}
			return err // the update comes again
		}
		files = append(files, a)
	}
	if strings.TrimSpace(text) == "" && len(files) == 0 {
		if kind := mediaKind(msg); kind != "" {
			return b.notice(ctx, msg, "unsupported:"+key, fmt.Sprintf("Sorry, %s messages are not supported yet. Please send text.", kind))
		}
		return nil // service messages (members joining, pins…)
	}
	content := text
	if edited {
		content = "(edited) " + text
	}
	meta := services.MessageMeta{TelegramMeta: services.TelegramMeta{
		ChatID: msg.Chat.ID, ChatType: string(msg.Chat.Type), MessageID: msg.ID,
		FromID: msg.From.ID, FromUsername: msg.From.Username,
	}}
	if msg.ReplyToMessage != nil {
		meta.ReplyToMessageID = msg.ReplyToMessage.ID
	}
	if edited {
		meta.Edited, meta.EditDate, meta.UpdateID = true, msg.EditDate, upd.ID
	}
	if caption || len(files) > 0 {
		meta.Caption, meta.Media = caption, mediaKind(msg)
	}
	// A forwarded message is someone else's words, whoever forwards it: no
	// command ("/approve 7" written by a stranger decides nothing), and
	// the run answering it, and any later prompt carrying it, is tainted.
	forwarded := msg.ForwardOrigin != nil
	if forwarded {
		meta.TaintedBy = services.Origin{Kind: services.OriginForward}.String()
	}
	// The text is parsed once, here: Post takes the command as parsed
	// (an edited message's content, "(edited) /new", is no command, though
	// its metadata names the one its text was).
	var cmd services.ParsedCommand
	if name, args, isCmd := services.ParseCommand(text); isCmd && !forwarded {
		meta.Command = name
		if !edited {
			cmd = services.ParsedCommand{Name: name, Args: args}
		}
	}
	metaJSON := meta.Encode()
	stored, created, err := b.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: timeline,
		Source:        services.SourceTelegram,
		Content:       content,
		DedupeKey:     key,
		Metadata:      metaJSON,
		Attachments:   files,
		Command:       &cmd,
	})
	if err != nil {
		switch services.ErrorKind(err) {
		case services.EINVALID, services.ETOOLARGE:
			// Telling the sender is all that can be done; delivering the
			// update again would fail the same way.
			return b.notice(ctx, msg, "rejected:"+key, services.ErrorMessage(err))
		}
		return fmt.Errorf("telegram: store message: %w", err)
	}
	attrs := []any{"message_id", stored.ID, "timeline", timeline, "chat_id", msg.Chat.ID, "created", created}
	if b.opts.LogContent {
		attrs = append(attrs, "content", content)
	}
	b.log.Debug("telegram message stored", attrs...)
	return nil
}

// dedupeKey identifies a Telegram message (and an edit of it) for
// idempotent storing.
// dedupeKey is what makes a stored Telegram message unique: the message for
// a new one (as it always was, so older rows keep matching), and for an
// edit the update that carried it (Telegram numbers updates uniquely; two
// edits within one second share an edit_date).
func dedupeKey(updateID int64, msg *models.Message, edited bool) string {
	k := fmt.Sprintf("tg:%d:%d", msg.Chat.ID, msg.ID)
	if edited {
		k += fmt.Sprintf(":edit:u%d", updateID)
	}
	return k
}

// addressed reports whether a group message is meant for the bot (it
// replies to the bot, or mentions it: a text mention of the bot's user, or
// its whole @username, case-insensitively — "@botnamenet" is not
// "@botname") and returns its text without that mention ("/new@bot" stays:
// ParseCommand reads it). An error means the bot's username is not known yet
// (getMe failing): the update must not be confirmed.
func (b *Bot) addressed(ctx context.Context, msg *models.Message, text string) (string, bool, error) {
	if msg.ReplyToMessage != nil && msg.ReplyToMessage.From != nil && msg.ReplyToMessage.From.ID == b.botID {
		return text, true, nil
	}
	for _, e := range append(msg.Entities, msg.CaptionEntities...) {
		if e.Type == models.MessageEntityTypeTextMention && e.User != nil && e.User.ID == b.botID {
			return text, true, nil
		}
	}
	username, err := b.botUsername(ctx)
	if err != nil {
		return text, false, &unaddressedError{err}
	}
	text, ok := removeMention(text, username)
	return text, ok, nil
}

// removeMention finds @username as a whole word in text. A mention that
// starts a word is removed; one glued to a command ("/new@bot") is left.
func removeMention(text, username string) (string, bool) {
	mention := "@" + username
	for i := 0; i+len(mention) <= len(text); i++ {
		// Usernames are ASCII: a byte-wise case-insensitive match cannot
		// split a multi-byte character.
		if text[i] != '@' || !strings.EqualFold(text[i:i+len(mention)], mention) {
			continue
		}
		end := i + len(mention)
		if end < len(text) && isUsernameByte(text[end]) {
			continue // "@botnamenet" is somebody else
		}
		if i > 0 && text[i-1] != ' ' && text[i-1] != '\n' {
			return text, true
		}
		return strings.TrimSpace(text[:i] + text[end:]), true
	}
	return text, false
}

func isUsernameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// access decides whether the sender may talk and in which timeline. It
// answers an unknown sender under the pairing policy with their code.
func (b *Bot) access(ctx context.Context, msg *models.Message, group, edited bool) (string, bool, error) {
	uid := msg.From.ID
	switch {
	case b.owners[uid]:
		return services.DefaultTimeline, true, nil
	case b.opts.Policy == PolicyOpen, b.allowed[uid]:
		return UserTimeline(uid), true, nil
	case b.opts.Policy == PolicyAllowlist:
		b.log.Info("ignored message from a sender not allowed", "from_id", uid, "chat_id", msg.Chat.ID)
		return "", false, nil
	}
	p, err := b.opts.Store.PairingByUser(ctx, uid)
	if err == nil && p.Approved() {
		return p.TimelineScope, true, nil
	}
	if err != nil && !services.IsKind(err, services.ENOTFOUND) {
		return "", false, err
	}
	if group || edited {
		// Codes are handed out in private chats only, once per message.
		return "", false, nil
	}
	p, err = b.requestPairing(ctx, msg)
	if err != nil {
		return "", false, err
	}
	if p.Approved() { // approved between the two reads
		return p.TimelineScope, true, nil
	}
	b.log.Info("pairing code sent to an unknown sender", "from_id", uid, "chat_id", msg.Chat.ID)
	text := fmt.Sprintf("Hi! This bot is private. To talk to it, ask its owner to approve the code `%s` "+
		"(valid until %s UTC). Nothing you send reaches the assistant until then.",
		p.Code, p.ExpiresAt.UTC().Format("15:04"))
	// One reply per code: further messages while the code is valid (the
	// pairing keeps it) are keyed alike and schedule nothing.
	return "", false, b.notice(ctx, msg, fmt.Sprintf("pairing:%d:%s", uid, p.Code), text)
}

func (b *Bot) requestPairing(ctx context.Context, msg *models.Message) (services.Pairing, error) {
	name := strings.TrimSpace(msg.From.FirstName + " " + msg.From.LastName)
	if msg.From.Username != "" {
		name = strings.TrimSpace(name + " @" + msg.From.Username)
	}
	var lastErr error
	for range 5 {
		code := NewPairingCode()
		p, err := b.opts.Store.RequestPairing(ctx, services.Pairing{
			UserID: msg.From.ID, ChatID: msg.Chat.ID, DisplayName: name, Code: code,
			TimelineScope: UserTimeline(msg.From.ID), ExpiresAt: time.Now().Add(b.opts.PairingTTL),
		})
		if err == nil && p.Code == code && b.opts.Audit != nil { // a new request, not the pending one again
			if _, aerr := b.opts.Audit.AppendAudit(ctx, services.PairingAudit(string(Channel), "asked", p)); aerr != nil {
				b.log.Error("audit: pairing request not recorded", "from_id", p.UserID, "err", aerr)
			}
		}
		if err == nil && !p.Approved() { // keyed by the code: asking again announces nothing new
			if err := b.announcePairing(ctx, p); err != nil {
				return services.Pairing{}, err
			}
		}
		if !services.IsKind(err, services.ECONFLICT) {
			return p, err
		}
		lastErr = err // code collision: draw another
	}
	return services.Pairing{}, lastErr
}

// notice schedules a short reply to msg that does not come from the agent.
func (b *Bot) notice(ctx context.Context, msg *models.Message, key, text string) error {
	return enqueue(ctx, b.opts.Queue, OutboundPayload{Key: key, ChatID: msg.Chat.ID, ReplyToMessageID: msg.ID, Text: text})
}

// inboundFile is the file of msg the channel stores, nil when none or
// when no media store is configured.
func (b *Bot) inboundFile(msg *models.Message) *inboundFile {
	if b.opts.Media == nil {
		return nil
	}
	return fileOf(msg, b.downloadLimit())
}

// mediaKind names the non-text content of a message, "" when none.
func mediaKind(m *models.Message) string {
	switch {
	case len(m.Photo) > 0:
		return "photo"
	case m.Sticker != nil:
		return "sticker"
	case m.Voice != nil:
		return "voice"
	case m.VideoNote != nil:
		return "video note"
	case m.Video != nil:
		return "video"
	case m.Animation != nil:
		return "animation"
	case m.Audio != nil:
		return "audio"
	case m.Document != nil:
		return "document"
	case m.Location != nil:
		return "location"
	case m.Contact != nil:
		return "contact"
	case m.Poll != nil:
		return "poll"
	}
	return ""
}
