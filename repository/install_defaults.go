package repository

import (
	"context"
)

// ContextDefault returns the context mode this database runs when the
// rollout flag variables are unset: "scoped" for a database that held no
// conversation when this version first started on it (one it created),
// "legacy" for one holding messages from before context scopes. The
// decision is made once, by the first instance that asks (two starting
// together agree), and kept.
func (s *Store) ContextDefault(ctx context.Context) (string, error) {
	_, err := s.db.Exec(ctx, `
		INSERT INTO install_defaults (id, context_mode)
		SELECT 1, CASE WHEN EXISTS (SELECT 1 FROM chat_messages) THEN 'legacy' ELSE 'scoped' END
		ON CONFLICT (id) DO NOTHING`)
	if err != nil {
		return "", wrapErr("decide context default", err)
	}
	var mode string
	err = s.db.QueryRow(ctx, `SELECT context_mode FROM install_defaults WHERE id = 1`).Scan(&mode)
	return mode, wrapErr("read context default", err)
}
