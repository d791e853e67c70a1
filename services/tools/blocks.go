package tools

import (
	"context"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/markdown"
)

// read_block and replace_block address a Markdown file's sections by their
// heading path ("Plan / Risks", or just "Risks"), with the parser that reads
// [notes.md#Plan] references in prompts (services/markdown).

type blockArgs struct {
	Path    string `json:"path" jsonschema:"Markdown file path relative to the workspace root."`
	Heading string `json:"heading" jsonschema:"The section's heading path, e.g. \"Plan / Risks\" or just \"Risks\" (case does not matter)."`
}

type replaceBlockArgs struct {
	Path    string `json:"path" jsonschema:"Markdown file path relative to the workspace root."`
	Heading string `json:"heading" jsonschema:"The section's heading path, e.g. \"Plan / Risks\" or just \"Risks\"."`
	Content string `json:"content" jsonschema:"The section's new body, below its heading line (which is kept)."`
}

type blockResult struct {
	Path      string `json:"path"`
	Heading   string `json:"heading"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
	Content   string `json:"content,omitempty"`
	Size      int64  `json:"size,omitempty"`
	Mtime     string `json:"mtime,omitempty"`
}

func (t workspaceTools) section(call Call, path, heading string, write bool) (w *Workspace, rel, doc, text string, start, end int, err error) {
	if w, err = t.workspace(call); err != nil {
		return
	}
	if write {
		rel, err = w.resolveWrite(path)
	} else {
		rel, err = w.Resolve(path)
	}
	if err != nil {
		return
	}
	if doc, _, err = readText(w, path, rel); err != nil {
		return
	}
	var ok bool
	if text, start, end, ok = markdown.Section(doc, heading); !ok {
		err = services.CodedErrorf(services.ENOTFOUND, CodeBadArguments, "%q has no heading %q (headings: %s)", path, heading, headings(doc))
	}
	return
}

func (t workspaceTools) readBlock(ctx context.Context, call Call, a blockArgs) (Result, error) {
	w, rel, _, text, start, end, err := t.section(call, a.Path, a.Heading, false)
	if err != nil {
		return Result{}, err
	}
	return withUntrusted(w.untrustedOf(rel))(JSONResult(blockResult{Path: shownPath(a.Path), Heading: a.Heading, StartLine: start, EndLine: end, Content: text}))
}

func (t workspaceTools) replaceBlock(ctx context.Context, call Call, a replaceBlockArgs) (Result, error) {
	w, rel, doc, _, start, end, err := t.section(call, a.Path, a.Heading, true)
	if err != nil {
		return Result{}, err
	}
	lines := strings.Split(doc, "\n")
	body := strings.TrimRight(a.Content, "\n")
	out := append([]string{}, lines[:start]...) // up to and with the heading line
	if body != "" {
		out = append(out, strings.Split(body, "\n")...)
	}
	newEnd := len(out)
	out = append(out, lines[end:]...)
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	_, after, err := w.writeFile(a.Path, rel, []byte(strings.Join(out, "\n")), false, call.RunID)
	if err != nil {
		return Result{}, err
	}
	w.noteWrite(call.ContextScope, rel, nil, after, false)
	if err := w.noteRecapWrite(call, rel, false); err != nil {
		return Result{}, err
	}
	return JSONResult(blockResult{Path: shownPath(a.Path), Heading: a.Heading, StartLine: start, EndLine: newEnd,
		Size: after.Size(), Mtime: formatTime(after.ModTime())})
}

// headings lists a document's heading paths (at most 20) for an error.
func headings(doc string) string {
	var hs []string
	for _, b := range markdown.ParseBlocks(doc) {
		if b.Kind == markdown.BlockHeading && len(hs) < 20 {
			hs = append(hs, "\""+b.Path+"\"")
		}
	}
	if len(hs) == 0 {
		return "none"
	}
	return strings.Join(hs, ", ")
}
