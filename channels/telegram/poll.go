package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// allowedUpdates are the update kinds the channel asks for.
var allowedUpdates = []string{"message", "edited_message", "callback_query"}

// IsLeader reports whether this instance holds the polling lease now.
func (b *Bot) IsLeader() bool { return b.leader.Load() }

// RunPolling long-polls Telegram until ctx ends, but only while this
// instance holds the polling lease: the others retry every LeaderRetry and
// take over when the leader stops or its database connection drops.
//
// It runs its own getUpdates loop rather than the library's: the library
// confirms updates to Telegram (by asking for the next offset) before they
// are handled, and keeps the offset in memory. Here an update is confirmed
// only after its message is stored and its id recorded in the database, so
// a crash or a new leader neither loses nor reprocesses updates.
func (b *Bot) RunPolling(ctx context.Context) {
	name := "telegram-poll:" + strconv.FormatInt(b.botID, 10)
	for ctx.Err() == nil {
		lease, err := b.opts.Leases.TryLease(ctx, name)
		if err != nil {
			b.log.Warn("telegram: try polling lease", "err", err)
		}
		if lease == nil {
			sleep(ctx, b.opts.LeaderRetry)
			continue
		}
		b.log.Info("telegram: this instance polls for updates")
		b.leader.Store(true)
		b.pollWhileLeader(ctx, lease)
		b.leader.Store(false)
		lease.Release()
		b.log.Info("telegram: stopped polling")
	}
}

func (b *Bot) pollWhileLeader(ctx context.Context, lease Lease) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-lease.Lost():
			b.log.Warn("telegram: polling lease lost (database connection dropped)")
			cancel()
		case <-ctx.Done():
		}
	}()
	// getUpdates is refused while a webhook is set.
	if _, err := b.api.DeleteWebhook(ctx, &bot.DeleteWebhookParams{}); err != nil && ctx.Err() == nil {
		b.log.Warn("telegram: deleteWebhook", "err", err)
	}
	offset, err := b.opts.Store.LastUpdateID(ctx, b.botID)
	if err != nil {
		b.log.Warn("telegram: read offset", "err", err)
		sleep(ctx, b.opts.LeaderRetry)
		return
	}
	var backoff time.Duration
	for ctx.Err() == nil {
		if backoff > 0 {
			sleep(ctx, backoff)
		}
		started := time.Now()
		updates, err := b.getUpdates(ctx, offset+1)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("telegram: getUpdates", "err", err)
			}
			backoff = min(max(2*backoff, 200*time.Millisecond), 5*time.Second)
			continue
		}
		backoff = 0
		for _, u := range updates {
			if u.ID <= offset {
				continue // delivered again: already stored
			}
			if retryIn, err := b.handle(ctx, u); err != nil {
				// Not confirmed: the next getUpdates fetches it again.
				b.log.Warn("telegram: handle update", "update_id", u.ID, "err", err, "retry_in", retryIn)
				backoff = retryIn
				break
			}
			if err := b.opts.Store.SetLastUpdateID(ctx, b.botID, u.ID); err != nil {
				b.log.Warn("telegram: record offset", "update_id", u.ID, "err", err)
				backoff = time.Second
				break
			}
			offset = u.ID
		}
		if len(updates) == 0 && time.Since(started) < b.opts.PollIdle {
			// A server that ignores the long-poll timeout answers at once.
			sleep(ctx, b.opts.PollIdle)
		}
	}
}

// getUpdates asks for the updates from offset on, waiting up to PollTimeout.
func (b *Bot) getUpdates(ctx context.Context, offset int64) ([]*models.Update, error) {
	body, _ := json.Marshal(map[string]any{
		"offset":          offset,
		"timeout":         int(b.opts.PollTimeout.Seconds()),
		"allowed_updates": allowedUpdates,
	})
	ctx, cancel := context.WithTimeout(ctx, b.opts.PollTimeout+15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.opts.APIURL+"/bot"+b.opts.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %s", redact(err.Error(), b.opts.Token))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: read: %w", err)
	}
	var r struct {
		OK          bool             `json:"ok"`
		Result      []*models.Update `json:"result"`
		Description string           `json:"description"`
		ErrorCode   int              `json:"error_code"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d, undecodable answer: %w", resp.StatusCode, err)
	}
	if !r.OK {
		return nil, fmt.Errorf("getUpdates: HTTP %d: %d %s", resp.StatusCode, r.ErrorCode, r.Description)
	}
	return r.Result, nil
}

func redact(s, token string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte(token), []byte("***")))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
