package repository

import (
	"context"
	"time"
)

// CreateSession stores a session by the hash of its id.
func (s *Store) CreateSession(ctx context.Context, idHash []byte, expires time.Time) error {
	_, err := s.db.Exec(ctx, `INSERT INTO web_sessions (id_sha256, expires_at) VALUES ($1, $2)`, idHash, expires)
	return wrapErr("create session", err)
}

// SessionValid reports whether an unexpired session has this id hash.
func (s *Store) SessionValid(ctx context.Context, idHash []byte) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM web_sessions WHERE id_sha256 = $1 AND expires_at > now())`, idHash).Scan(&ok)
	return ok, wrapErr("check session", err)
}

// DeleteSession ends one session (logout) and drops expired ones.
func (s *Store) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := s.db.Exec(ctx, `DELETE FROM web_sessions WHERE id_sha256 = $1 OR expires_at < now()`, idHash)
	return wrapErr("delete session", err)
}

// DeleteAllSessions ends every session (a new login token).
func (s *Store) DeleteAllSessions(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `DELETE FROM web_sessions`)
	return wrapErr("delete sessions", err)
}
