package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// maxTyping bounds the indicator of a run whose end was never reported.
const maxTyping = 30 * time.Minute

// Typing shows "typing…" in the Telegram chat of a run's trigger while the
// run works. It needs only the Bot API, so the agent runtime can be built
// with it before the channel that posts into ChatService.
type Typing struct {
	api   *bot.Bot
	every time.Duration

	mu     sync.Mutex
	active map[int64]context.CancelFunc
}

var _ services.RunObserver = (*Typing)(nil)

// NewTyping returns the indicator for the bot with token at apiURL
// (DefaultAPIURL when empty), repeating the chat action every every
// (default 4 s; Telegram shows it for about 5 s).
func NewTyping(token, apiURL string, client *http.Client, every time.Duration) (*Typing, error) {
	if token == "" {
		return nil, errors.New("telegram: no bot token")
	}
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if every <= 0 {
		every = 4 * time.Second
	}
	if client == nil {
		client = &http.Client{}
	}
	api, err := bot.New(token, bot.WithServerURL(strings.TrimRight(apiURL, "/")), bot.WithSkipGetMe(),
		bot.WithHTTPClient(10*time.Second, client),
		bot.WithDefaultHandler(func(context.Context, *bot.Bot, *models.Update) {}))
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	return &Typing{api: api, every: every, active: map[int64]context.CancelFunc{}}, nil
}

// RunStarted shows "typing…" in the chat of a Telegram-triggered run until
// RunFinished. Errors are ignored: the indicator is cosmetic.
func (t *Typing) RunStarted(_ context.Context, run services.Run, trigger services.Message) {
	if trigger.Source != services.SourceTelegram {
		return
	}
	meta := trigger.Meta
	if meta.ChatID == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxTyping)
	t.mu.Lock()
	if old := t.active[run.ID]; old != nil {
		old()
	}
	t.active[run.ID] = cancel
	t.mu.Unlock()
	go func() {
		tick := time.NewTicker(t.every)
		defer tick.Stop()
		for {
			_, _ = t.api.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: meta.ChatID, Action: models.ChatActionTyping})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// RunFinished stops the run's indicator.
func (t *Typing) RunFinished(_ context.Context, run services.Run, _ services.Message) {
	t.mu.Lock()
	cancel := t.active[run.ID]
	delete(t.active, run.ID)
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Close stops every indicator.
func (t *Typing) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, cancel := range t.active {
		cancel()
		delete(t.active, id)
	}
}
