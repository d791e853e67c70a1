package services

import "context"

// WorkspaceBlock is one block of a workspace file (docs/CONTEXT.md,
// "Blocks"): a Markdown section (ID its heading path, as a pin's block
// names it) or a top-level key of a JSON object ("$.key"), with its
// heading, level, 1-based inclusive line range, tokens, the pin that
// selects it and the blocks nested in it.
//
// BlockID is a Markdown section's stable short id ("b3"): kept in the
// workspace (.blocks/<path>.json), it stays with the section when its
// heading is renamed, and is never given to another section.
type WorkspaceBlock struct {
	ID       string           `json:"id"`
	BlockID  string           `json:"block_id,omitempty"`
	Heading  string           `json:"heading"`
	Level    int              `json:"level"`
	Lines    [2]int           `json:"lines"`
	Tokens   int              `json:"tokens"`
	Pin      Pin              `json:"pin"`
	Children []WorkspaceBlock `json:"children,omitempty"`
}

// FileBlocks is a file's block tree: Kind "markdown" (sections by
// heading), "json" (an object's top-level keys) or "text" (one block, the
// whole file).
type FileBlocks struct {
	Path   string           `json:"path"`
	Kind   string           `json:"kind"`
	Lines  int              `json:"lines"`
	Tokens int              `json:"tokens"`
	Blocks []WorkspaceBlock `json:"blocks"`
}

// WorkspaceBlocks list the blocks of a timeline's workspace files.
type WorkspaceBlocks interface {
	// Blocks returns path's block tree: ENOTFOUND for a missing file,
	// EINVALID for a refused path or a directory.
	Blocks(ctx context.Context, timelineScope, path string) (FileBlocks, error)
}
