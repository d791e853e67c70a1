// Package markdown is the text format prompts and tools share, over one
// Markdown model: Parse reads a text with goldmark (GitHub-flavoured, no
// HTML blocks) into a Doc, the tree the channels' renderers (Telegram,
// terminal, web page) walk and from which ParseBlocks takes blocks and sections with
// their line ranges. On top of it: line and section references
// (path:12-20, path#Heading), `@path` mentions, and code (where none of
// these count). It does no I/O except through functions the caller passes
// in.
package markdown
