-- +goose Up
-- Taint through history (docs/SECURITY.md): a compaction summary written
-- from turns that carried untrusted text records those sources, so a
-- later prompt that includes the summary starts its run tainted. Rows of
-- chat_messages record the same in their metadata (tainted_by).
ALTER TABLE chat_summary_segments ADD COLUMN tainted_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE chat_summary_segments DROP COLUMN tainted_by;
