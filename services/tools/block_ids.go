package tools

import (
	"encoding/json"
	"hash/fnv"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/markdown"
)

// BlockIDsDir holds the stable block ids of a workspace's Markdown files,
// one JSON file per file (BlockIDsDir/<path>.json; docs/CONTEXT.md,
// "Blocks"). The service writes them; the agent's write tools may not.
const BlockIDsDir = ".blocks"

// blockIDsMu serialises the updates of the block ids.
var blockIDsMu sync.Mutex

// blockIDs is a file's record of its sections' ids: Next is the number of
// the next new id (ids are never given twice), Blocks each section as it
// was last seen.
type blockIDs struct {
	Next   int           `json:"next"`
	Blocks []blockRecord `json:"blocks"`
}

// blockRecord is a section as last seen: its id, heading path, level,
// position among the headings and the hashed words of its own text (to
// its first subsection), by which a renamed heading is matched.
type blockRecord struct {
	ID    string   `json:"id"`
	Path  string   `json:"path"`
	Level int      `json:"level"`
	Index int      `json:"index"`
	Words []uint32 `json:"words,omitempty"`
}

// maxBlockWords bounds the words a record keeps of a section.
const maxBlockWords = 256

// sectionsOf lists doc's headings as records without ids.
func sectionsOf(doc string) []blockRecord {
	lines := strings.Split(doc, "\n")
	var heads []markdown.Block
	for _, b := range markdown.ParseBlocks(doc) {
		if b.Kind == markdown.BlockHeading {
			heads = append(heads, b)
		}
	}
	out := make([]blockRecord, len(heads))
	for i, h := range heads {
		end := len(lines)
		if i+1 < len(heads) {
			end = heads[i+1].StartLine - 1
		}
		body := ""
		if h.StartLine < end {
			body = strings.Join(lines[h.StartLine:end], "\n")
		}
		out[i] = blockRecord{Path: h.Path, Level: h.Level, Index: i, Words: wordHashes(body)}
	}
	return out
}

// wordHashes are the distinct words of s (lower case, letters and
// digits), hashed and sorted, at most maxBlockWords.
func wordHashes(s string) []uint32 {
	seen := map[uint32]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		seen[h.Sum32()] = true
	}
	out := make([]uint32, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	slices.Sort(out)
	if len(out) > maxBlockWords {
		out = out[:maxBlockWords]
	}
	return out
}

// similarity is the Jaccard index of two sorted word sets (-1 when both
// are empty).
func similarity(a, b []uint32) float64 {
	if len(a) == 0 && len(b) == 0 {
		return -1
	}
	both := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			both, i, j = both+1, i+1, j+1
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(both) / float64(len(a)+len(b)-both)
}

// renameMatch is the similarity at which a section whose heading path is
// new is taken for a recorded one of the same level.
const renameMatch = 0.5

// assign gives each section of now an id: a recorded section's when the
// heading path is the same, else when a recorded section of the same
// level, left unmatched, has mostly the same words (renameMatch; an
// empty section at the same position), else a new one. It reports
// whether the record changed.
func (r *blockIDs) assign(now []blockRecord) bool {
	used := make([]bool, len(r.Blocks))
	for i := range now {
		for j, old := range r.Blocks {
			if !used[j] && old.Path == now[i].Path {
				now[i].ID, used[j] = old.ID, true
				break
			}
		}
	}
	for i := range now {
		if now[i].ID != "" {
			continue
		}
		best, bestScore := -1, 0.0
		for j, old := range r.Blocks {
			if used[j] || old.Level != now[i].Level {
				continue
			}
			score := similarity(old.Words, now[i].Words)
			if score < 0 && old.Index == now[i].Index {
				score = 1 // both empty, at the same place
			}
			if score >= renameMatch && score > bestScore {
				best, bestScore = j, score
			}
		}
		if best >= 0 {
			now[i].ID, used[best] = r.Blocks[best].ID, true
		}
	}
	for i := range now {
		if now[i].ID == "" {
			r.Next = max(r.Next, 1)
			now[i].ID = "b" + strconv.Itoa(r.Next)
			r.Next++
		}
	}
	changed := len(now) != len(r.Blocks)
	for i := 0; !changed && i < len(now); i++ {
		o, n := r.Blocks[i], now[i]
		changed = o.ID != n.ID || o.Path != n.Path || o.Level != n.Level || o.Index != n.Index || !slices.Equal(o.Words, n.Words)
	}
	r.Blocks = now
	return changed
}

// sectionIDs reads rel's block ids, matches doc's sections to them
// (assign) and stores them when they changed; the ids in document order.
func (w *Workspace) sectionIDs(rel, doc string) ([]blockRecord, error) {
	side := BlockIDsDir + "/" + filepath.ToSlash(rel) + ".json"
	blockIDsMu.Lock()
	defer blockIDsMu.Unlock()
	var rec blockIDs
	if f, _, err := w.Open(side); err == nil {
		if json.NewDecoder(f).Decode(&rec) != nil {
			rec = blockIDs{} // not valid: ids start over, never reusing the record's next
		}
		f.Close()
	}
	now := sectionsOf(doc)
	if rec.assign(now) {
		data, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		if err := w.writeServiceFile(side, append(data, '\n')); err != nil {
			return nil, err
		}
	}
	return now, nil
}

// markdownFile reads a Markdown file of the workspace: its resolved path
// and text.
func (s *Workspaces) markdownFile(timelineScope, name string) (*Workspace, string, string, error) {
	w, err := s.For(timelineScope)
	if err != nil {
		return nil, "", "", err
	}
	rel, err := w.Resolve(name)
	if err != nil {
		return nil, "", "", err
	}
	data, err := s.ReadFile(timelineScope, name)
	if err != nil {
		return nil, "", "", err
	}
	return w, rel, string(data), nil
}

// PinBlock returns a pin by block id as a pin by the heading path its
// section has now (services.PinBlocks): ENOTFOUND when the file or the
// section is gone.
func (s *Workspaces) PinBlock(timelineScope string, p services.Pin) (services.Pin, error) {
	w, rel, doc, err := s.markdownFile(timelineScope, p.Path)
	if services.IsKind(err, services.ENOTFOUND) {
		return services.Pin{}, &services.Error{Kind: services.ENOTFOUND, Message: "file " + p.Path + " not found", Err: err}
	}
	if err != nil {
		return services.Pin{}, err
	}
	ids, err := w.sectionIDs(rel, doc)
	if err != nil {
		return services.Pin{}, err
	}
	for _, b := range ids {
		if b.ID == p.ID {
			return services.Pin{Path: p.Path, Block: b.Path}, nil
		}
	}
	return services.Pin{}, services.Errorf(services.ENOTFOUND, "block %s is not in %s (its section was removed)", p.ID, p.Path)
}

// withBlockIDs sets the stable ids of a Markdown file's block tree, in
// document order (the tree's pre-order).
func withBlockIDs(blocks []services.WorkspaceBlock, ids []blockRecord, next *int) {
	for i := range blocks {
		if *next < len(ids) {
			blocks[i].BlockID = ids[*next].ID
		}
		*next++
		withBlockIDs(blocks[i].Children, ids, next)
	}
}
