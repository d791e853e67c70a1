package app

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/channels/telegram"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web"
)

// telegramStore adapts the repository to the Telegram channel's Store.
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

// debugSource serves the web debug page from the store (the cursor type is
// the web package's own, so the web layer imports no repository code).
type debugSource struct{ *repository.Store }

var _ web.DebugSource = debugSource{}

func (d debugSource) SummaryCursors(ctx context.Context, timelineScope string) ([]web.SummaryCursor, error) {
	cursors, err := d.Store.SummaryCursors(ctx, timelineScope)
	if err != nil {
		return nil, err
	}
	out := make([]web.SummaryCursor, len(cursors))
	for i, c := range cursors {
		out[i] = web.SummaryCursor(c)
	}
	return out, nil
}

// NewPairings is the Telegram pairings of the database behind pool, as the
// pairing page and `switchboard pair` read and approve them.
func NewPairings(pool *pgxpool.Pool) web.Pairings {
	return webPairings{repository.NewTelegramStore(pool)}
}
