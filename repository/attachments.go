package repository

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

var _ services.AttachmentStore = (*Store)(nil)

const attachmentColumns = `id, message_id, timeline_scope, kind, mime_type, size_bytes, sha256, storage_key,
	original_name, width, height, duration_sec, COALESCE(transcription, ''), created_at`

func scanAttachment(row pgx.Row) (services.Attachment, error) {
	var a services.Attachment
	err := row.Scan(&a.ID, &a.MessageID, &a.TimelineScope, &a.Kind, &a.MIMEType, &a.Size, &a.SHA256, &a.StorageKey,
		&a.Name, &a.Width, &a.Height, &a.Duration, &a.Transcription, &a.CreatedAt)
	return a, err
}

// InsertAttachment links a saved attachment to its message; see
// services.AttachmentStore.
func (s *Store) InsertAttachment(ctx context.Context, a services.Attachment) (services.Attachment, error) {
	if a.MessageID == 0 || a.TimelineScope == "" {
		return services.Attachment{}, services.Errorf(services.EINVALID, "attachment has no message or timeline")
	}
	var transcript *string
	if a.Transcription != "" {
		transcript = &a.Transcription
	}
	out, err := scanAttachment(s.db.QueryRow(ctx, `
		INSERT INTO attachments (message_id, timeline_scope, kind, mime_type, size_bytes, sha256, storage_key,
			original_name, width, height, duration_sec, transcription)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		RETURNING `+attachmentColumns,
		a.MessageID, a.TimelineScope, a.Kind, a.MIMEType, a.Size, a.SHA256, a.StorageKey,
		a.Name, a.Width, a.Height, a.Duration, transcript))
	return out, wrapErr("store attachment", err)
}

// AttachmentsOf returns the attachments of messages of a timeline, by
// message id.
func (s *Store) AttachmentsOf(ctx context.Context, timeline string, messageIDs []int64) (map[int64][]services.Attachment, error) {
	out := map[int64][]services.Attachment{}
	if len(messageIDs) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `SELECT `+attachmentColumns+` FROM attachments
		WHERE timeline_scope = $1 AND message_id = ANY($2) ORDER BY id`, timeline, messageIDs)
	if err != nil {
		return nil, wrapErr("read attachments", err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAttachment(rows)
		if err != nil {
			return nil, wrapErr("read attachments", err)
		}
		out[a.MessageID] = append(out[a.MessageID], a)
	}
	return out, wrapErr("read attachments", rows.Err())
}

// GetAttachment returns one attachment; ENOTFOUND when absent.
func (s *Store) GetAttachment(ctx context.Context, id int64) (services.Attachment, error) {
	a, err := scanAttachment(s.db.QueryRow(ctx, `SELECT `+attachmentColumns+` FROM attachments WHERE id = $1`, id))
	if err == pgx.ErrNoRows {
		return a, services.Errorf(services.ENOTFOUND, "no attachment #%d", id)
	}
	return a, wrapErr("read attachment", err)
}

// SetTranscription stores a transcript once: the first one stays.
func (s *Store) SetTranscription(ctx context.Context, id int64, text string) error {
	_, err := s.db.Exec(ctx, `UPDATE attachments SET transcription = $2 WHERE id = $1 AND transcription IS NULL`, id, text)
	return wrapErr("store transcription", err)
}
