// Package contextmgr holds the pure, database-free building blocks of the
// ContextManager: token counting, layer budgets, the stable prefix hash,
// @path reminders, Markdown blocks and line/section references, tool-result
// compression for history and the archived-summary template. Nothing here
// does I/O except through functions the caller passes in.
package contextmgr
