-- Recall over the archive (docs/CONTEXT.md, "Recall"): full-text indexes
-- over a timeline's messages and its summary segments, read by the
-- recall_search / recall_timeline / recall_detail tools and by the
-- retrieved layer (handoffs of earlier sub-agents).
--
-- Expression indexes, not stored tsvector columns: an insert computes the
-- vector once for the index (GIN's pending list makes that cheap) and the
-- table rows do not grow. 'simple' is language-neutral (no stemming, no stop
-- words), so any language the owner writes in is found word for word. The
-- first 100,000 characters of a message are indexed (a tsvector is limited
-- to 1 MB; tool results are far shorter). Rows of the service
-- (source 'system': command replies, notices) are never recalled, so they
-- are left out of the index.
--
-- idx_chat_messages_handoffs finds the handoffs of sub-agents (hidden tool
-- rows of kind handoff) of a timeline newest first, for the retrieved layer.

-- +goose Up
CREATE INDEX idx_chat_messages_fts ON chat_messages
    USING GIN (to_tsvector('simple', left(content, 100000)))
    WHERE source <> 'system';
CREATE INDEX idx_chat_summary_segments_fts ON chat_summary_segments
    USING GIN (to_tsvector('simple', summary_text));
CREATE INDEX idx_chat_messages_handoffs ON chat_messages (timeline_scope, id)
    WHERE visible = 0 AND metadata->>'kind' = 'handoff';

-- +goose Down
DROP INDEX idx_chat_messages_handoffs;
DROP INDEX idx_chat_summary_segments_fts;
DROP INDEX idx_chat_messages_fts;
