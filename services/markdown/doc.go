// Package markdown is the text format prompts and tools share: Markdown
// blocks and sections, line and section references (path:12-20,
// path#Heading), `@path` mentions and code spans (where none of these
// count). It does no I/O except through functions the caller passes in.
package markdown
