package repository

import (
	"context"
)

// OwnerTokenHash returns the stored SHA-256 of the owner's token;
// ENOTFOUND when none was generated yet.
func (s *Store) OwnerTokenHash(ctx context.Context) ([]byte, error) {
	var h []byte
	err := s.db.QueryRow(ctx, `SELECT token_sha256 FROM owner_credentials WHERE id = 1`).Scan(&h)
	return h, wrapErr("get owner token", err)
}

// InitOwnerTokenHash stores hash unless a token exists; it returns the hash
// in force and whether it was this call that stored it (two instances
// starting together agree on one token).
func (s *Store) InitOwnerTokenHash(ctx context.Context, hash []byte) ([]byte, bool, error) {
	tag, err := s.db.Exec(ctx, `INSERT INTO owner_credentials (id, token_sha256) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, hash)
	if err != nil {
		return nil, false, wrapErr("init owner token", err)
	}
	if tag.RowsAffected() == 1 {
		return hash, true, nil
	}
	h, err := s.OwnerTokenHash(ctx)
	return h, false, err
}

// ReplaceOwnerTokenHash replaces the owner's token (switchboard token reset).
func (s *Store) ReplaceOwnerTokenHash(ctx context.Context, hash []byte) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO owner_credentials (id, token_sha256) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET token_sha256 = EXCLUDED.token_sha256, created_at = now()`, hash)
	return wrapErr("replace owner token", err)
}
