package app

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/channels/telegram"
	"github.com/switchboard/switchboard/repository"
)

// telegramLeases hands out the polling lease as a session advisory lock.
type telegramLeases struct{ s *repository.TelegramStore }

func (l telegramLeases) TryLease(ctx context.Context, name string) (telegram.Lease, error) {
	lease, err := l.s.TryLease(ctx, name, 2*time.Second)
	if lease == nil || err != nil {
		return nil, err
	}
	return lease, nil
}
