package prompt

import (
	"context"

	"github.com/switchboard/switchboard/services"
)

// CompactScope summarises the oldest whole turns of one context scope that
// no main prompt reads (a schedule's sched:<id>), under its own cursor,
// keeping the last KeepTurns turns; the main and global summaries are left
// alone. A failed or invalid summary moves nothing.
func (m *Manager) CompactScope(ctx context.Context, timeline, scope string) (CompactResult, error) {
	if m.opts.Summariser == nil {
		return CompactResult{Scope: scope}, services.Errorf(services.EUNAVAILABLE, "compaction needs a model; none is configured")
	}
	if m.opts.Context == nil {
		return CompactResult{Scope: scope}, services.Errorf(services.EUNAVAILABLE, "compaction needs the context store")
	}
	if scope == services.MainScope || scope == services.GlobalSummaryScope {
		return CompactResult{Scope: scope}, services.Errorf(services.EINVALID, "scope %q is compacted with Compact", scope)
	}
	m.compactMu.Lock()
	defer m.compactMu.Unlock()
	res, err := m.compactScope(ctx, timeline, scope, "")
	if m.opts.OnCompaction != nil {
		result := "ok"
		switch {
		case err != nil:
			result = "failed"
		case res.Skipped != "":
			result = "skipped"
		case res.FreeForm:
			result = "free_form"
		}
		m.opts.OnCompaction(result)
	}
	return res, err
}
