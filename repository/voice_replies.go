package repository

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var _ services.VoiceReplies = (*Store)(nil)

// VoiceRepliesOn reports whether a voice question in the chat is answered
// with a voice note too (voice_replies; no row: on).
func (s *Store) VoiceRepliesOn(ctx context.Context, channel services.Source, chatID int64) (bool, error) {
	var on bool
	err := s.db.QueryRow(ctx, `SELECT enabled FROM voice_replies WHERE channel = $1 AND chat_id = $2`, string(channel), chatID).Scan(&on)
	if err == pgx.ErrNoRows {
		return true, nil
	}
	return on, wrapErr("read the voice setting", err)
}

// SetVoiceReplies records the chat's setting.
func (s *Store) SetVoiceReplies(ctx context.Context, channel services.Source, chatID int64, on bool) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO voice_replies (channel, chat_id, enabled) VALUES ($1, $2, $3)
		ON CONFLICT (channel, chat_id) DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = now()`,
		string(channel), chatID, on)
	return wrapErr("store the voice setting", err)
}
