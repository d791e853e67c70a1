package repository

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/switchboard/switchboard/services"
)

// TelegramStore keeps the Telegram channel's state: the polling offset and
// command-menu hash per bot (telegram_bot_state), pairings of non-owner users
// (telegram_pairings), the chunks of outbound deliveries already sent
// (telegram_sent_chunks), and the polling leader's advisory lock.
type TelegramStore struct {
	pool *pgxpool.Pool
}

// NewTelegramStore returns a TelegramStore on pool.
func NewTelegramStore(pool *pgxpool.Pool) *TelegramStore { return &TelegramStore{pool: pool} }

// LastUpdateID returns the last update id stored for the bot; 0 when none.
func (s *TelegramStore) LastUpdateID(ctx context.Context, botID int64) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT last_update_id FROM telegram_bot_state WHERE bot_id = $1`, botID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, wrapErr("get telegram offset", err)
}

// SetLastUpdateID records updateID as processed. The offset only moves
// forward, so a late writer cannot make the next poll refetch old updates.
func (s *TelegramStore) SetLastUpdateID(ctx context.Context, botID, updateID int64) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO telegram_bot_state (bot_id, last_update_id) VALUES ($1, $2)
		ON CONFLICT (bot_id) DO UPDATE
		SET last_update_id = GREATEST(telegram_bot_state.last_update_id, EXCLUDED.last_update_id), updated_at = now()`,
		botID, updateID)
	return wrapErr("set telegram offset", err)
}

// CommandsHash returns the hash of the command menu last set for the bot; ""
// when none was.
func (s *TelegramStore) CommandsHash(ctx context.Context, botID int64) (string, error) {
	var h string
	err := s.pool.QueryRow(ctx, `SELECT commands_sha256 FROM telegram_bot_state WHERE bot_id = $1`, botID).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return h, wrapErr("get telegram commands hash", err)
}

// SetCommandsHash records the hash of the command menu just set.
func (s *TelegramStore) SetCommandsHash(ctx context.Context, botID int64, hash string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO telegram_bot_state (bot_id, commands_sha256) VALUES ($1, $2)
		ON CONFLICT (bot_id) DO UPDATE SET commands_sha256 = EXCLUDED.commands_sha256, updated_at = now()`,
		botID, hash)
	return wrapErr("set telegram commands hash", err)
}

const pairingColumns = `user_id, chat_id, display_name, code, timeline_scope, created_at, expires_at, approved_at`

func scanPairing(row pgx.Row) (services.Pairing, error) {
	var p services.Pairing
	err := row.Scan(&p.UserID, &p.ChatID, &p.DisplayName, &p.Code, &p.TimelineScope, &p.CreatedAt, &p.ExpiresAt, &p.ApprovedAt)
	return p, err
}

// RequestPairing returns the user's pairing, creating it with p's
// code and expiry when the user has none or only an expired one. A pending
// unexpired pairing keeps its code (the user asking again gets the same
// one); an approved pairing is returned as is. ECONFLICT when p.Code is
// already another user's (draw a new code and retry).
func (s *TelegramStore) RequestPairing(ctx context.Context, p services.Pairing) (services.Pairing, error) {
	row := s.pool.QueryRow(ctx, `
		INSERT INTO telegram_pairings (user_id, chat_id, display_name, code, timeline_scope, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (user_id) DO UPDATE SET
			chat_id = EXCLUDED.chat_id,
			display_name = EXCLUDED.display_name,
			code = CASE WHEN telegram_pairings.approved_at IS NULL AND telegram_pairings.expires_at <= now()
				THEN EXCLUDED.code ELSE telegram_pairings.code END,
			created_at = CASE WHEN telegram_pairings.approved_at IS NULL AND telegram_pairings.expires_at <= now()
				THEN now() ELSE telegram_pairings.created_at END,
			expires_at = CASE WHEN telegram_pairings.approved_at IS NULL AND telegram_pairings.expires_at <= now()
				THEN EXCLUDED.expires_at ELSE telegram_pairings.expires_at END
		RETURNING `+pairingColumns,
		p.UserID, p.ChatID, p.DisplayName, p.Code, p.TimelineScope, p.ExpiresAt)
	got, err := scanPairing(row)
	return got, wrapErr("request telegram pairing", err)
}

// PairingByUser returns a user's pairing; ENOTFOUND when none.
func (s *TelegramStore) PairingByUser(ctx context.Context, userID int64) (services.Pairing, error) {
	p, err := scanPairing(s.pool.QueryRow(ctx, `SELECT `+pairingColumns+` FROM telegram_pairings WHERE user_id = $1`, userID))
	return p, wrapErr("get telegram pairing", err)
}

// ApprovePairing approves the pending, unexpired pairing with code
// (case-insensitive); ENOTFOUND when there is none (unknown, expired or
// already approved).
func (s *TelegramStore) ApprovePairing(ctx context.Context, code string) (services.Pairing, error) {
	code = strings.ToUpper(strings.TrimSpace(code))
	p, err := scanPairing(s.pool.QueryRow(ctx, `
		UPDATE telegram_pairings SET approved_at = now()
		WHERE code = $1 AND approved_at IS NULL AND expires_at > now()
		RETURNING `+pairingColumns, code))
	if err != nil && errors.Is(err, pgx.ErrNoRows) {
		return services.Pairing{}, services.Errorf(services.ENOTFOUND, "no pending pairing with code %q (unknown, expired or already approved)", code)
	}
	return p, wrapErr("approve telegram pairing", err)
}

// DenyPairing refuses the pending, unexpired pairing with code: it expires
// now (the row stays; asking again later draws a new code). ENOTFOUND when
// there is none.
func (s *TelegramStore) DenyPairing(ctx context.Context, code string) (services.Pairing, error) {
	code = strings.ToUpper(strings.TrimSpace(code))
	p, err := scanPairing(s.pool.QueryRow(ctx, `
		UPDATE telegram_pairings SET expires_at = now()
		WHERE code = $1 AND approved_at IS NULL AND expires_at > now()
		RETURNING `+pairingColumns, code))
	if err != nil && errors.Is(err, pgx.ErrNoRows) {
		return services.Pairing{}, services.Errorf(services.ENOTFOUND, "no pending pairing with code %q (unknown, expired or already decided)", code)
	}
	return p, wrapErr("deny telegram pairing", err)
}

// ListPairings returns approved pairings and unexpired pending ones,
// oldest first.
func (s *TelegramStore) ListPairings(ctx context.Context) ([]services.Pairing, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+pairingColumns+` FROM telegram_pairings
		WHERE approved_at IS NOT NULL OR expires_at > now()
		ORDER BY created_at, user_id
		LIMIT 500`)
	if err != nil {
		return nil, wrapErr("list telegram pairings", err)
	}
	defer rows.Close()
	var out []services.Pairing
	for rows.Next() {
		p, err := scanPairing(rows)
		if err != nil {
			return nil, wrapErr("list telegram pairings", err)
		}
		out = append(out, p)
	}
	return out, wrapErr("list telegram pairings", rows.Err())
}

// SentChunks returns the indexes of the chunks of an outbound delivery that
// were already sent.
func (s *TelegramStore) SentChunks(ctx context.Context, outboundKey string) (map[int]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT chunk_index FROM telegram_sent_chunks WHERE outbound_key = $1 AND message_id IS NOT NULL`, outboundKey)
	if err != nil {
		return nil, wrapErr("list sent telegram chunks", err)
	}
	defer rows.Close()
	sent := map[int]bool{}
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			return nil, wrapErr("list sent telegram chunks", err)
		}
		sent[i] = true
	}
	return sent, wrapErr("list sent telegram chunks", rows.Err())
}

// BeginChunk records, before the call, that a chunk's sendMessage starts
// (message_id NULL), and returns how many sends of it began whose outcome
// is unknown, this one included.
func (s *TelegramStore) BeginChunk(ctx context.Context, outboundKey string, index int) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `
		INSERT INTO telegram_sent_chunks (outbound_key, chunk_index, message_id, attempts) VALUES ($1, $2, NULL, 1)
		ON CONFLICT (outbound_key, chunk_index) DO UPDATE SET attempts = telegram_sent_chunks.attempts + 1, sent_at = now()
		RETURNING attempts`, outboundKey, index).Scan(&n)
	return n, wrapErr("begin telegram chunk", err)
}

// AbortChunk takes back the last BeginChunk of a chunk Telegram refused.
func (s *TelegramStore) AbortChunk(ctx context.Context, outboundKey string, index int) error {
	_, err := s.pool.Exec(ctx, `UPDATE telegram_sent_chunks SET attempts = attempts - 1
		WHERE outbound_key = $1 AND chunk_index = $2 AND message_id IS NULL AND attempts > 0`, outboundKey, index)
	return wrapErr("abort telegram chunk", err)
}

// MarkChunkSent records that chunk index of an outbound delivery reached
// Telegram as messageID. Recording it twice is harmless.
func (s *TelegramStore) MarkChunkSent(ctx context.Context, outboundKey string, index int, messageID int64) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO telegram_sent_chunks (outbound_key, chunk_index, message_id) VALUES ($1, $2, $3)
		ON CONFLICT (outbound_key, chunk_index) DO UPDATE SET message_id = EXCLUDED.message_id
		WHERE telegram_sent_chunks.message_id IS NULL`, outboundKey, index, messageID)
	return wrapErr("mark telegram chunk sent", err)
}

// LastSentMessage is the message id of the last chunk of an outbound
// delivery that reached Telegram (0 when none did).
func (s *TelegramStore) LastSentMessage(ctx context.Context, outboundKey string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `
		SELECT message_id FROM telegram_sent_chunks WHERE outbound_key = $1 AND message_id > 0
		ORDER BY chunk_index DESC LIMIT 1`, outboundKey).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, wrapErr("last sent telegram message", err)
}
