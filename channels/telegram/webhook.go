package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// SecretHeader carries the webhook's secret token on every call from Telegram.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// WebhookHandler receives updates pushed by Telegram. A request without the
// secret gets 401, with a wrong one 403, and nothing is stored. The update
// is handled before answering, so a 200 means it is stored (or given up
// after failed attempts, its sender told); on a database error the handler
// answers 500 and Telegram delivers it again, which stores nothing twice. (The library's webhook handler answers before the update
// is handled, which would lose updates in a crash.)
func (b *Bot) WebhookHandler(secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		got := r.Header.Get(SecretHeader)
		if got == "" {
			http.Error(w, "missing secret token", http.StatusUnauthorized)
			return
		}
		if secret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
			b.log.Warn("telegram webhook: wrong secret token", "remote", r.RemoteAddr)
			http.Error(w, "wrong secret token", http.StatusForbidden)
			return
		}
		var upd models.Update
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&upd); err != nil {
			http.Error(w, "bad update", http.StatusBadRequest)
			return
		}
		if _, err := b.handle(r.Context(), &upd); err != nil {
			b.log.Warn("telegram webhook: handle update", "update_id", upd.ID, "err", err)
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// SetWebhook tells Telegram to push updates to url with secret. Every
// instance may call it at start; it is idempotent.
func (b *Bot) SetWebhook(ctx context.Context, url, secret string) error {
	_, err := b.api.SetWebhook(ctx, &bot.SetWebhookParams{URL: url, SecretToken: secret, AllowedUpdates: allowedUpdates})
	return err
}
