package telegram

import (
	"context"
	"encoding/json"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// maxTyping bounds the indicator of a run whose end was never reported.
const maxTyping = 30 * time.Minute

// RunStarted shows "typing…" in the chat of a Telegram-triggered run,
// repeated every TypingEvery (Telegram shows it for ~5 s) until RunFinished.
// Errors are ignored: the indicator is cosmetic.
func (b *Bot) RunStarted(_ context.Context, run services.Run, trigger services.Message) {
	if trigger.Source != services.SourceTelegram {
		return
	}
	var meta struct {
		ChatID int64 `json:"chat_id"`
	}
	if json.Unmarshal(trigger.Metadata, &meta) != nil || meta.ChatID == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxTyping)
	b.typingMu.Lock()
	if old := b.typing[run.ID]; old != nil {
		old()
	}
	b.typing[run.ID] = cancel
	b.typingMu.Unlock()
	go func() {
		t := time.NewTicker(b.opts.TypingEvery)
		defer t.Stop()
		for {
			_, _ = b.api.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: meta.ChatID, Action: models.ChatActionTyping})
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// RunFinished stops the run's typing indicator.
func (b *Bot) RunFinished(_ context.Context, run services.Run, _ services.Message) {
	b.typingMu.Lock()
	cancel := b.typing[run.ID]
	delete(b.typing, run.ID)
	b.typingMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Close stops every typing indicator.
func (b *Bot) Close() {
	b.typingMu.Lock()
	defer b.typingMu.Unlock()
	for id, cancel := range b.typing {
		cancel()
		delete(b.typing, id)
	}
}
