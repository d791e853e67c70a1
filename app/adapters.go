package app

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/channels/telegram"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
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

// workspaceBlocks lists a workspace file's blocks with the prompt's token
// counts (services.WorkspaceBlocks).
type workspaceBlocks struct {
	spaces *tools.Workspaces
	count  func(string) int
}

func (b workspaceBlocks) Blocks(_ context.Context, timeline, path string) (services.FileBlocks, error) {
	return b.spaces.Blocks(timeline, path, b.count)
}
