package repository

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

const memoryColumns = `id, timeline_scope, key, value, confidence, source, version, updated_at, COALESCE(run_id, 0), COALESCE(origin, '')`

func scanMemory(row pgx.Row) (services.MemoryItem, error) {
	var m services.MemoryItem
	var conf float32
	err := row.Scan(&m.ID, &m.TimelineScope, &m.Key, &m.Value, &conf, &m.Source, &m.Version, &m.UpdatedAt, &m.RunID, &m.Origin)
	m.Confidence = float64(conf)
	return m, err
}

// ListMemory returns a timeline's items, highest confidence first.
func (s *Store) ListMemory(ctx context.Context, timelineScope string) ([]services.MemoryItem, error) {
	rows, err := s.db.Query(ctx, `SELECT `+memoryColumns+` FROM memory_items WHERE timeline_scope = $1 AND forgotten_at IS NULL ORDER BY confidence DESC, id`, timelineScope)
	if err != nil {
		return nil, wrapErr("list memory", err)
	}
	defer rows.Close()
	var out []services.MemoryItem
	for rows.Next() {
		m, err := scanMemory(rows)
		if err != nil {
			return nil, wrapErr("list memory", err)
		}
		out = append(out, m)
	}
	return out, wrapErr("list memory", rows.Err())
}

// UpsertMemory stores an item by key (at a version when Version > 0).
func (s *Store) UpsertMemory(ctx context.Context, m services.MemoryItem) (services.MemoryItem, error) {
	m.Key, m.Value = strings.TrimSpace(m.Key), strings.TrimSpace(m.Value)
	switch {
	case m.Key == "" || len(m.Key) > 200:
		return services.MemoryItem{}, services.Errorf(services.EINVALID, "memory key must be 1 to 200 bytes")
	case m.Value == "" || len(m.Value) > 4000:
		return services.MemoryItem{}, services.Errorf(services.EINVALID, "memory value must be 1 to 4000 bytes")
	case m.Confidence < 0 || m.Confidence > 1:
		return services.MemoryItem{}, services.Errorf(services.EINVALID, "confidence must be between 0 and 1, got %g", m.Confidence)
	}
	if m.Source == "" {
		m.Source = "api"
	}
	if m.Version > 0 {
		out, err := scanMemory(s.db.QueryRow(ctx, `
			UPDATE memory_items SET value = $4, confidence = $5, source = $6, version = version + 1, updated_at = now(),
				run_id = NULLIF($7, 0)::bigint, origin = NULLIF($8, ''), forgotten_at = NULL
			WHERE timeline_scope = $1 AND key = $2 AND version = $3
			RETURNING `+memoryColumns, m.TimelineScope, m.Key, m.Version, m.Value, m.Confidence, m.Source, m.RunID, m.Origin))
		if err == pgx.ErrNoRows {
			var id int64
			if err := s.db.QueryRow(ctx, `SELECT id FROM memory_items WHERE timeline_scope = $1 AND key = $2`, m.TimelineScope, m.Key).Scan(&id); err != nil {
				return services.MemoryItem{}, services.Errorf(services.ENOTFOUND, "memory item %q not found", m.Key)
			}
			return services.MemoryItem{}, s.versionConflict(ctx, "memory_items", m.TimelineScope, id, m.Version)
		}
		return out, wrapErr("update memory", err)
	}
	out, err := scanMemory(s.db.QueryRow(ctx, `
		INSERT INTO memory_items (timeline_scope, key, value, confidence, source, run_id, origin)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, 0)::bigint, NULLIF($7, ''))
		ON CONFLICT (timeline_scope, key) DO UPDATE SET value = EXCLUDED.value, confidence = EXCLUDED.confidence,
			source = EXCLUDED.source, version = memory_items.version + 1, updated_at = now(),
			run_id = EXCLUDED.run_id, origin = EXCLUDED.origin, forgotten_at = NULL
		RETURNING `+memoryColumns, m.TimelineScope, m.Key, m.Value, m.Confidence, m.Source, m.RunID, m.Origin))
	return out, wrapErr("upsert memory", err)
}

// DeleteMemory removes an item at its version.
func (s *Store) DeleteMemory(ctx context.Context, timelineScope string, id int64, version int) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM memory_items WHERE id = $1 AND timeline_scope = $2 AND version = $3`, id, timelineScope, version)
	if err != nil {
		return wrapErr("delete memory", err)
	}
	if tag.RowsAffected() == 0 {
		return s.versionConflict(ctx, "memory_items", timelineScope, id, version)
	}
	return nil
}

// ForgetMemory marks an item forgotten: no prompt carries it any more; its
// row stays.
func (s *Store) ForgetMemory(ctx context.Context, timelineScope string, id int64) error {
	tag, err := s.db.Exec(ctx, `UPDATE memory_items SET forgotten_at = now() WHERE id = $1 AND timeline_scope = $2 AND forgotten_at IS NULL`, id, timelineScope)
	if err != nil {
		return wrapErr("forget memory", err)
	}
	if tag.RowsAffected() == 0 {
		return services.Errorf(services.ENOTFOUND, "no remembered item #%d here", id)
	}
	return nil
}
