// Package prompt is the ContextManager: it builds each prompt from stored
// state (system and tools, rules, settings, summaries, recent turns,
// retrieved items, the input) within a token budget, hashes the stable
// prefix, compacts a scope's history into summaries, compresses past tool
// results for history and counts tokens. The text format it reads (Markdown
// blocks, line and section references, @path) is package markdown.
package prompt
