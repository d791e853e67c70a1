package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/channels/telegram"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web"
)

// telegramDeps is what the Telegram channel needs from serve's wiring.
type telegramDeps struct {
	Pool *pgxpool.Pool
	// Chat stores inbound messages (ChatService).
	Chat telegram.Poster
	// Queue delivers answers; the channel registers its handler on it.
	Queue outboundQueue
	// Web gets the pairing page's data and, in webhook mode, the webhook
	// handler (POST /telegram/webhook). Optional.
	Web *web.Server
	// Link, when set, is completed with the queue and the bot: ChatService's
	// router and the agent's run observer built from it start working.
	Link   *telegramLink
	Logger *slog.Logger
	// HTTPClient makes the Bot API calls (tests); nil: a default client.
	HTTPClient *http.Client
	// SendError counts failed sends by code (metrics); optional.
	SendError func(code string)
	// PollIdle, LeaderRetry: polling timings (tests); zero: the defaults.
	PollIdle    time.Duration
	LeaderRetry time.Duration
}

// startTelegram starts the Telegram channel when TELEGRAM_BOT_TOKEN is set:
// it registers the outbound handler, sets the command menu if it changed,
// and polls (leader-elected) or sets the webhook. The pairing page works
// either way. stop (never nil) stops polling and waits for it.
func startTelegram(ctx context.Context, cfg *Config, deps telegramDeps) (stop func(), err error) {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tstore := repository.NewTelegramStore(deps.Pool)
	if deps.Web != nil {
		deps.Web.SetTelegram(webPairings{tstore}, nil)
	}
	if cfg.TelegramBotToken == "" {
		return func() {}, nil
	}
	if deps.Link != nil && deps.Queue != nil {
		deps.Link.queue.Store(&deps.Queue)
	}
	if deps.Queue == nil || deps.Chat == nil {
		return func() {}, errors.New("telegram: the channel needs the chat service and the queue")
	}
	b, err := telegram.New(ctx, telegram.Options{
		Token:       cfg.TelegramBotToken,
		APIURL:      cfg.TelegramAPIURL,
		HTTPClient:  deps.HTTPClient,
		OwnerIDs:    cfg.TelegramOwnerIDs,
		Policy:      cfg.TelegramPolicy,
		AllowedIDs:  cfg.TelegramAllowedIDs,
		GroupIDs:    cfg.TelegramGroups,
		Chat:        deps.Chat,
		Store:       telegramStore{tstore},
		Leases:      telegramLeases{tstore},
		Queue:       deps.Queue,
		Logger:      log,
		LogContent:  cfg.LogContent,
		SendError:   deps.SendError,
		PollIdle:    deps.PollIdle,
		LeaderRetry: deps.LeaderRetry,
	})
	if err != nil {
		return func() {}, err
	}
	deps.Queue.HandleOutbound(telegram.Channel, b.Deliver)
	if deps.Link != nil {
		deps.Link.bot.Store(b)
	}
	if len(cfg.TelegramOwnerIDs) == 0 {
		log.Warn("TELEGRAM_OWNER_IDS is empty: nobody on Telegram writes to the owner's timeline")
	}
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if called, err := b.SyncCommands(cctx); err != nil {
			log.Warn("telegram: setMyCommands failed; the command menu is unchanged", "err", err)
		} else if called {
			log.Info("telegram: command menu updated")
		}
	}()

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if cfg.TelegramMode == "webhook" {
		if deps.Web == nil {
			cancel()
			return func() {}, errors.New("telegram: webhook mode needs the web server")
		}
		deps.Web.SetTelegram(webPairings{tstore}, b.WebhookHandler(cfg.TelegramWebhookSecret))
		sctx, scancel := context.WithTimeout(runCtx, 30*time.Second)
		err := b.SetWebhook(sctx, cfg.TelegramWebhookURL, cfg.TelegramWebhookSecret)
		scancel()
		if err != nil {
			// Updates still arrive if an earlier start set the webhook.
			log.Warn("telegram: setWebhook failed", "err", err)
		}
		log.Info("telegram channel started", "mode", "webhook", "bot_id", b.BotID())
	} else {
		wg.Add(1)
		go func() { defer wg.Done(); b.RunPolling(runCtx) }()
		log.Info("telegram channel started", "mode", "polling", "bot_id", b.BotID())
	}
	return func() {
		cancel()
		wg.Wait()
		b.Close()
	}, nil
}

// telegramLink is what ChatService and the agent runtime need from the
// Telegram channel, made before them and completed by startTelegram (which
// needs the queue, built after them): the reply router (Routers) and the
// run observer showing "typing…".
type telegramLink struct {
	queue atomic.Pointer[outboundQueue]
	bot   atomic.Pointer[telegram.Bot]
}

type outboundQueue = interface {
	services.OutboundQueue
	HandleOutbound(channel string, h services.OutboundHandler)
}

var (
	_ services.RunObserver   = (*telegramLink)(nil)
	_ services.OutboundQueue = (*telegramLink)(nil)
)

// Routers returns ChatService's reply routers: the Telegram one when the
// channel is configured.
func (l *telegramLink) Routers(cfg *Config) map[string]services.ReplyRouter {
	if cfg.TelegramBotToken == "" {
		return nil
	}
	return map[string]services.ReplyRouter{services.SourceTelegram: telegram.Router{Queue: l}}
}

// EnqueueOutbound forwards to the queue given to startTelegram;
// EUNAVAILABLE before it started.
func (l *telegramLink) EnqueueOutbound(ctx context.Context, o services.Outbound) error {
	q := l.queue.Load()
	if q == nil {
		return services.Errorf(services.EUNAVAILABLE, "the Telegram channel has not started")
	}
	return (*q).EnqueueOutbound(ctx, o)
}

func (l *telegramLink) RunStarted(ctx context.Context, run services.Run, trigger services.Message) {
	if b := l.bot.Load(); b != nil {
		b.RunStarted(ctx, run, trigger)
	}
}

func (l *telegramLink) RunFinished(ctx context.Context, run services.Run, trigger services.Message) {
	if b := l.bot.Load(); b != nil {
		b.RunFinished(ctx, run, trigger)
	}
}

// telegramStore adapts the repository to the channel's Store.
type telegramStore struct{ *repository.TelegramStore }

func (s telegramStore) PairingByUser(ctx context.Context, userID int64) (telegram.Pairing, error) {
	p, err := s.TelegramPairingByUser(ctx, userID)
	return toChannelPairing(p), err
}

func (s telegramStore) RequestPairing(ctx context.Context, p telegram.Pairing) (telegram.Pairing, error) {
	got, err := s.RequestTelegramPairing(ctx, repository.TelegramPairing{
		UserID: p.UserID, ChatID: p.ChatID, DisplayName: p.DisplayName, Code: p.Code,
		TimelineScope: p.Timeline, ExpiresAt: p.ExpiresAt,
	})
	return toChannelPairing(got), err
}

func toChannelPairing(p repository.TelegramPairing) telegram.Pairing {
	return telegram.Pairing{
		UserID: p.UserID, ChatID: p.ChatID, DisplayName: p.DisplayName, Code: p.Code,
		Timeline: p.TimelineScope, ExpiresAt: p.ExpiresAt, Approved: p.ApprovedAt != nil,
	}
}

// telegramLeases hands out the polling lease as a session advisory lock.
type telegramLeases struct{ s *repository.TelegramStore }

func (l telegramLeases) TryLease(ctx context.Context, name string) (telegram.Lease, error) {
	lease, err := l.s.TryLease(ctx, name, 2*time.Second)
	if lease == nil || err != nil {
		return nil, err
	}
	return lease, nil
}

// webPairings adapts the repository to the pairing page.
type webPairings struct{ s *repository.TelegramStore }

func (w webPairings) ListPairings(ctx context.Context) ([]web.PairingView, error) {
	list, err := w.s.ListTelegramPairings(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.PairingView, 0, len(list))
	for _, p := range list {
		out = append(out, toPairingView(p))
	}
	return out, nil
}

func (w webPairings) ApprovePairing(ctx context.Context, code string) (web.PairingView, error) {
	p, err := w.s.ApproveTelegramPairing(ctx, code)
	if services.IsKind(err, services.ENOTFOUND) {
		return web.PairingView{}, services.Errorf(services.ENOTFOUND, "no pending pairing with code %q (unknown, expired or already approved)", code)
	}
	return toPairingView(p), err
}

func toPairingView(p repository.TelegramPairing) web.PairingView {
	return web.PairingView{UserID: p.UserID, Name: p.DisplayName, Timeline: p.TimelineScope, ExpiresAt: p.ExpiresAt, ApprovedAt: p.ApprovedAt}
}
