package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var _ services.ScheduleStore = (*Store)(nil)

const scheduleColumns = `id, timeline_scope, name, task, kind, spec, timezone, notify, profile, state, state_reason,
	next_fire_at, last_fire_at, last_status, last_notified, failures, version, created_at, updated_at,
	watch, watch_hash, watch_text`

func scanSchedule(row pgx.Row) (services.Schedule, error) {
	var s services.Schedule
	var watch []byte
	err := row.Scan(&s.ID, &s.TimelineScope, &s.Name, &s.Task, &s.Kind, &s.Spec, &s.Timezone, &s.Notify, &s.Profile,
		&s.State, &s.StateReason, &s.NextFireAt, &s.LastFireAt, &s.LastStatus, &s.LastNotified, &s.Failures, &s.Version,
		&s.CreatedAt, &s.UpdatedAt, &watch, &s.WatchHash, &s.WatchText)
	if err == nil && len(watch) > 0 && string(watch) != "null" {
		s.Watch = &services.Watch{}
		if jerr := json.Unmarshal(watch, s.Watch); jerr != nil {
			return s, fmt.Errorf("schedule #%d: stored watch: %w", s.ID, jerr)
		}
	}
	return s, err
}

// watchJSON is a schedule's watch as stored (NULL: none).
func watchJSON(w *services.Watch) ([]byte, error) {
	if w == nil {
		return nil, nil
	}
	return json.Marshal(w)
}

// CreateSchedule stores a new schedule.
func (s *Store) CreateSchedule(ctx context.Context, sc services.Schedule) (services.Schedule, error) {
	if sc.State == "" {
		sc.State = services.ScheduleActive
	}
	watch, err := watchJSON(sc.Watch)
	if err != nil {
		return sc, wrapErr("create schedule", err)
	}
	out, err := scanSchedule(s.db.QueryRow(ctx, `
		INSERT INTO schedules (timeline_scope, name, task, kind, spec, timezone, notify, profile, state, next_fire_at, watch)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING `+scheduleColumns,
		sc.TimelineScope, sc.Name, sc.Task, sc.Kind, sc.Spec, sc.Timezone, sc.Notify, sc.Profile, sc.State, sc.NextFireAt, watch))
	return out, wrapErr("create schedule", err)
}

// scheduleLockKey is the first key of the per-timeline lock on active
// schedules.
const scheduleLockKey = 7310

// LockActiveSchedules takes a transaction advisory lock on timeline's
// active schedules: concurrent creates and resumes count and insert one
// after another. Outside a transaction it is released at once.
func (s *Store) LockActiveSchedules(ctx context.Context, timeline string) error {
	_, err := s.db.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || '/' || $2))`, scheduleLockKey, timeline)
	return wrapErr("lock active schedules", err)
}

// GetSchedule returns one schedule.
func (s *Store) GetSchedule(ctx context.Context, id int64) (services.Schedule, error) {
	out, err := scanSchedule(s.db.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = $1`, id))
	if err == pgx.ErrNoRows {
		return out, services.Errorf(services.ENOTFOUND, "no schedule #%d", id)
	}
	return out, wrapErr("get schedule", err)
}

// ListSchedules lists schedules oldest first.
func (s *Store) ListSchedules(ctx context.Context, timeline string, withDeleted bool) ([]services.Schedule, error) {
	rows, err := s.db.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE ($1 = '' OR timeline_scope = $1) AND ($2 OR state <> 'deleted') ORDER BY id`, timeline, withDeleted)
	if err != nil {
		return nil, wrapErr("list schedules", err)
	}
	defer rows.Close()
	var out []services.Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, wrapErr("list schedules", err)
		}
		out = append(out, sc)
	}
	return out, wrapErr("list schedules", rows.Err())
}

// UpdateSchedule stores sc if its version is unchanged.
func (s *Store) UpdateSchedule(ctx context.Context, sc services.Schedule) (services.Schedule, error) {
	watch, err := watchJSON(sc.Watch)
	if err != nil {
		return sc, wrapErr("update schedule", err)
	}
	out, err := scanSchedule(s.db.QueryRow(ctx, `
		UPDATE schedules SET name = $3, task = $4, kind = $5, spec = $6, timezone = $7, notify = $8, profile = $9,
			state = $10, state_reason = $11, next_fire_at = $12, last_fire_at = $13, last_status = $14,
			last_notified = $15, failures = $16, watch = $17, watch_hash = $18, watch_text = $19,
			version = version + 1, updated_at = now()
		WHERE id = $1 AND version = $2 RETURNING `+scheduleColumns,
		sc.ID, sc.Version, sc.Name, sc.Task, sc.Kind, sc.Spec, sc.Timezone, sc.Notify, sc.Profile, sc.State, sc.StateReason,
		sc.NextFireAt, sc.LastFireAt, sc.LastStatus, sc.LastNotified, sc.Failures, watch, sc.WatchHash, sc.WatchText))
	if err == pgx.ErrNoRows {
		return out, services.Errorf(services.ECONFLICT, "schedule #%d was changed meanwhile (version %d is not current); read it again", sc.ID, sc.Version)
	}
	return out, wrapErr("update schedule", err)
}

const fireColumns = `id, schedule_id, fire_at, COALESCE(run_id, 0), attempts, status, notified, COALESCE(message_id, 0),
	result, error, started_at, finished_at, tokens, model_calls, missed, content_hash`

func scanFire(row pgx.Row) (services.ScheduleFire, error) {
	var f services.ScheduleFire
	err := row.Scan(&f.ID, &f.ScheduleID, &f.FireAt, &f.RunID, &f.Attempts, &f.Status, &f.Notified, &f.MessageID,
		&f.Result, &f.Error, &f.StartedAt, &f.FinishedAt, &f.Tokens, &f.ModelCalls, &f.Missed, &f.ContentHash)
	return f, err
}

func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// InsertFire records the start of a fire; ECONFLICT when it has a row.
func (s *Store) InsertFire(ctx context.Context, f services.ScheduleFire) (services.ScheduleFire, error) {
	if f.Attempts == 0 {
		f.Attempts = 1
	}
	out, err := scanFire(s.db.QueryRow(ctx, `
		INSERT INTO schedule_fires (schedule_id, fire_at, attempts, missed) VALUES ($1, $2, $3, $4)
		ON CONFLICT (schedule_id, fire_at) DO NOTHING RETURNING `+fireColumns, f.ScheduleID, f.FireAt, f.Attempts, f.Missed))
	if err == pgx.ErrNoRows {
		return out, services.Errorf(services.ECONFLICT, "schedule #%d already fired at %s", f.ScheduleID, f.FireAt.Format(time.RFC3339))
	}
	return out, wrapErr("insert fire", err)
}

// GetFire returns the fire of a schedule at a time.
func (s *Store) GetFire(ctx context.Context, scheduleID int64, at time.Time) (services.ScheduleFire, error) {
	out, err := scanFire(s.db.QueryRow(ctx, `SELECT `+fireColumns+` FROM schedule_fires WHERE schedule_id = $1 AND fire_at = $2`, scheduleID, at))
	if err == pgx.ErrNoRows {
		return out, services.Errorf(services.ENOTFOUND, "schedule #%d has no fire at %s", scheduleID, at.Format(time.RFC3339))
	}
	return out, wrapErr("get fire", err)
}

// UpdateFire stores a fire's progress or end.
func (s *Store) UpdateFire(ctx context.Context, f services.ScheduleFire) error {
	tag, err := s.db.Exec(ctx, `UPDATE schedule_fires SET run_id = $2, attempts = $3, status = $4, notified = $5,
		message_id = $6, result = $7, error = $8, finished_at = $9, tokens = $10, model_calls = $11, content_hash = $12
		WHERE id = $1`,
		f.ID, nullID(f.RunID), f.Attempts, f.Status, f.Notified, nullID(f.MessageID), f.Result, f.Error, f.FinishedAt,
		f.Tokens, f.ModelCalls, f.ContentHash)
	if err == nil && tag.RowsAffected() == 0 {
		return services.Errorf(services.ENOTFOUND, "no fire #%d", f.ID)
	}
	return wrapErr("update fire", err)
}

// ListFires lists a schedule's fires newest first.
func (s *Store) ListFires(ctx context.Context, scheduleID int64, limit int) ([]services.ScheduleFire, error) {
	return s.fires(ctx, `SELECT `+fireColumns+` FROM schedule_fires WHERE schedule_id = $1 ORDER BY fire_at DESC LIMIT $2`,
		scheduleID, clampLimit(limit))
}

// RunningFires lists fires still marked running.
func (s *Store) RunningFires(ctx context.Context) ([]services.ScheduleFire, error) {
	return s.fires(ctx, `SELECT `+fireColumns+` FROM schedule_fires WHERE status = 'running' ORDER BY id LIMIT 500`)
}

func (s *Store) fires(ctx context.Context, sql string, args ...any) ([]services.ScheduleFire, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrapErr("list fires", err)
	}
	defer rows.Close()
	out := []services.ScheduleFire{}
	for rows.Next() {
		f, err := scanFire(rows)
		if err != nil {
			return nil, wrapErr("list fires", err)
		}
		out = append(out, f)
	}
	return out, wrapErr("list fires", rows.Err())
}
