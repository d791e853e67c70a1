package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var (
	_ services.AuditLog   = (*Store)(nil)
	_ services.AuditPager = (*Store)(nil)
)

// auditLockKey is the first key of the transaction advisory lock that
// serialises appends to audit_log; the second is a hash of the schema.
const auditLockKey = "7320"

const auditColumns = `id, at, actor, channel, action, subject, run_id, timeline_scope, status, detail::text, prev_hash, hash`

func scanAudit(row pgx.Row) (services.AuditEntry, error) {
	var e services.AuditEntry
	var detail string
	err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Channel, &e.Action, &e.Subject, &e.RunID, &e.TimelineScope, &e.Status, &detail, &e.PrevHash, &e.Hash)
	e.Detail = json.RawMessage(detail)
	return e, err
}

// validAudit refuses an entry that cannot be a row.
func validAudit(e services.AuditEntry) error {
	switch {
	case strings.TrimSpace(e.Actor) == "":
		return services.Errorf(services.EINVALID, "audit entry: actor is required")
	case strings.TrimSpace(e.Action) == "":
		return services.Errorf(services.EINVALID, "audit entry: action is required")
	case len(e.Detail) > 0 && !json.Valid(e.Detail):
		return services.Errorf(services.EINVALID, "audit entry: detail is not valid JSON")
	case e.RunID < 0:
		return services.Errorf(services.EINVALID, "audit entry: run id %d is negative", e.RunID)
	}
	return nil
}

// AppendAudit adds e at the end of the chain and returns the stored row.
// On a Store bound to a transaction (NewTx, Transact) the row joins that
// transaction, and the append lock is held until it ends: keep such
// transactions short. Appends of every instance take the same
// transaction advisory lock, read the last row's hash, and insert, so the
// chain has one order.
func (s *Store) AppendAudit(ctx context.Context, e services.AuditEntry) (services.AuditEntry, error) {
	if err := validAudit(e); err != nil {
		return services.AuditEntry{}, err
	}
	var out services.AuditEntry
	err := s.transact(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.appendAuditLocked(ctx, e)
		return err
	})
	return out, err
}

// AppendAuditTx is AppendAudit in the caller's transaction: the row commits
// or rolls back with it.
func AppendAuditTx(ctx context.Context, tx pgx.Tx, e services.AuditEntry) (services.AuditEntry, error) {
	return NewTx(tx).AppendAudit(ctx, e)
}

// appendAuditLocked runs in a transaction: lock, read the head, insert.
func (s *Store) appendAuditLocked(ctx context.Context, e services.AuditEntry) (services.AuditEntry, error) {
	if _, err := s.db.Exec(ctx, `SELECT pg_advisory_xact_lock(`+auditLockKey+`, hashtext(current_schema() || '/audit_log'))`); err != nil {
		return services.AuditEntry{}, wrapErr("lock audit log", err)
	}
	detail := e.Detail
	if len(detail) == 0 {
		detail = json.RawMessage(`{}`)
	}
	// The stored form of detail (jsonb's text) is what the hash covers, so
	// it is read back from the server before hashing; at is the database's
	// clock, one clock for every instance.
	var prev, canonical string
	err := s.db.QueryRow(ctx, `
		SELECT nextval(pg_get_serial_sequence('audit_log', 'id')), clock_timestamp(),
			COALESCE((SELECT hash FROM audit_log ORDER BY id DESC LIMIT 1), ''), $1::jsonb::text`,
		string(detail)).Scan(&e.ID, &e.At, &prev, &canonical)
	if err != nil {
		return services.AuditEntry{}, wrapErr("read audit head", err)
	}
	if prev == "" {
		prev = services.AuditGenesis
	}
	e.PrevHash, e.Detail = prev, json.RawMessage(canonical)
	e.At = e.At.UTC().Truncate(time.Microsecond)
	e.Hash = services.AuditHash(e)
	out, err := scanAudit(s.db.QueryRow(ctx, `
		INSERT INTO audit_log (id, at, actor, channel, action, subject, run_id, timeline_scope, status, detail, prev_hash, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12)
		RETURNING `+auditColumns,
		e.ID, e.At, e.Actor, e.Channel, e.Action, e.Subject, e.RunID, e.TimelineScope, e.Status, canonical, e.PrevHash, e.Hash))
	if err != nil {
		return services.AuditEntry{}, wrapErr("append audit entry", err)
	}
	return out, nil
}

// ListAudit returns the rows at or after since, oldest first, at most limit
// (0: all).
func (s *Store) ListAudit(ctx context.Context, since time.Time, limit int) ([]services.AuditEntry, error) {
	if limit < 0 {
		return nil, services.Errorf(services.EINVALID, "audit list: limit %d is negative", limit)
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	return s.queryAudit(ctx, "list audit", `SELECT `+auditColumns+` FROM audit_log WHERE at >= $1 ORDER BY id LIMIT $2`, since, lim)
}

// AuditPage returns at most limit rows with an id below beforeID (0: from
// the newest), newest first.
func (s *Store) AuditPage(ctx context.Context, beforeID int64, limit int) ([]services.AuditEntry, error) {
	if limit <= 0 || limit > 1000 {
		return nil, services.Errorf(services.EINVALID, "audit page: limit %d, want 1 to 1000", limit)
	}
	return s.queryAudit(ctx, "page audit", `SELECT `+auditColumns+` FROM audit_log
		WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2`, beforeID, limit)
}

func (s *Store) queryAudit(ctx context.Context, op, sql string, args ...any) ([]services.AuditEntry, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	defer rows.Close()
	out := []services.AuditEntry{}
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, wrapErr(op, err)
		}
		out = append(out, e)
	}
	return out, wrapErr(op, rows.Err())
}

// VerifyAudit walks the chain from the first row: the number of rows whose
// link holds and the first row whose link does not (nil when whole).
func (s *Store) VerifyAudit(ctx context.Context) (int, *services.AuditEntry, error) {
	v, err := s.VerifyAuditChain(ctx)
	return v.Checked, v.Broken, err
}

// VerifyAuditChain walks the chain in id order, one row at a time, and
// stops at the first row whose prev_hash is not the hash of the row before
// it or whose hash does not match its content, saying which.
func (s *Store) VerifyAuditChain(ctx context.Context) (services.AuditVerdict, error) {
	v := services.AuditVerdict{Head: services.AuditGenesis}
	rows, err := s.db.Query(ctx, `SELECT `+auditColumns+` FROM audit_log ORDER BY id`)
	if err != nil {
		return v, wrapErr("verify audit", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return v, wrapErr("verify audit", err)
		}
		if reason := services.AuditCheck(v.Head, e); reason != "" {
			v.Broken, v.Reason = &e, fmt.Sprintf("row %d: %s", e.ID, reason)
			return v, nil
		}
		v.Checked++
		v.Head = e.Hash
	}
	return v, wrapErr("verify audit", rows.Err())
}
