package tools

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/markdown"
)

// Blocks returns the block tree of a workspace file (services.FileBlocks):
// Markdown sections by heading, nested by level; a JSON object's top-level
// keys; otherwise the whole file as one block. count counts tokens.
func (s *Workspaces) Blocks(timelineScope, name string, count func(string) int) (services.FileBlocks, error) {
	w, rel, doc, err := s.markdownFile(timelineScope, name)
	if err != nil {
		return services.FileBlocks{}, err
	}
	out := FileBlockTree(name, doc, count)
	if out.Kind == "markdown" {
		// Each section's stable id (BlockIDsDir), matched anew to the
		// file as it is now.
		ids, err := w.sectionIDs(rel, doc)
		if err != nil {
			return services.FileBlocks{}, err
		}
		n := 0
		withBlockIDs(out.Blocks, ids, &n)
	}
	return out, nil
}

// FileBlockTree splits doc (the file name's) into its block tree.
func FileBlockTree(name, doc string, count func(string) int) services.FileBlocks {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	if doc == "" {
		lines = nil
	}
	out := services.FileBlocks{Path: name, Kind: "text", Lines: len(lines), Tokens: count(doc), Blocks: []services.WorkspaceBlock{}}
	text := func(first, last int) string { return strings.Join(lines[first-1:last], "\n") }
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown":
		out.Kind = "markdown"
		var heads []markdown.Block
		for _, b := range markdown.ParseBlocks(doc) {
			if b.Kind == markdown.BlockHeading {
				heads = append(heads, b)
			}
		}
		flat := make([]services.WorkspaceBlock, len(heads))
		for i, h := range heads {
			end := len(lines)
			for _, next := range heads[i+1:] {
				if next.Level <= h.Level {
					end = next.StartLine - 1
					break
				}
			}
			end = max(end, h.StartLine)
			flat[i] = services.WorkspaceBlock{ID: h.Path, Heading: h.Heading, Level: h.Level, Lines: [2]int{h.StartLine, end},
				Tokens: count(text(h.StartLine, end)), Pin: services.Pin{Path: name, Block: h.Path}}
		}
		out.Blocks = nest(flat)
		return out
	case ".json":
		if blocks, ok := jsonBlocks(name, doc, lines, count); ok {
			out.Kind, out.Blocks = "json", blocks
			return out
		}
	}
	if len(lines) > 0 {
		out.Blocks = append(out.Blocks, services.WorkspaceBlock{ID: "", Heading: name, Level: 1, Lines: [2]int{1, len(lines)},
			Tokens: out.Tokens, Pin: services.Pin{Path: name}})
	}
	return out
}

// nest makes a flat list of sections (document order) a tree by level.
func nest(flat []services.WorkspaceBlock) []services.WorkspaceBlock {
	var build func(i, level int) ([]services.WorkspaceBlock, int)
	build = func(i, level int) ([]services.WorkspaceBlock, int) {
		out := []services.WorkspaceBlock{}
		for i < len(flat) && flat[i].Level > level {
			b := flat[i]
			b.Children, i = build(i+1, b.Level)
			if len(b.Children) == 0 {
				b.Children = nil
			}
			out = append(out, b)
		}
		return out, i
	}
	out, _ := build(0, 0)
	return out
}

// jsonBlocks splits a JSON object by its top-level keys: each key's block
// runs from the key's line to the line its value ends on; a pin selects
// those lines.
func jsonBlocks(name, doc string, lines []string, count func(string) int) ([]services.WorkspaceBlock, bool) {
	dec := json.NewDecoder(strings.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	lineAt := func(off int64) int { return bytes.Count([]byte(doc[:min(int(off), len(doc))]), []byte("\n")) + 1 }
	out := []services.WorkspaceBlock{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		// The key token ends at the offset after it; its line is the line
		// of its last character.
		first := lineAt(dec.InputOffset() - 1)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		last := lineAt(dec.InputOffset() - 1)
		out = append(out, services.WorkspaceBlock{ID: "$." + key, Heading: key, Level: 1, Lines: [2]int{first, last},
			Tokens: count(strings.Join(lines[first-1:min(last, len(lines))], "\n")), Pin: services.Pin{Path: name, Lines: []int{first, last}}})
	}
	return out, true
}
