package sandbox

import (
	"io/fs"
	"path/filepath"
	"sort"
	"time"
)

// maxSnapshotEntries bounds a snapshot's walk; a workspace beyond it is
// compared on its first entries only.
const maxSnapshotEntries = 200_000

type stamp struct {
	size  int64
	mtime time.Time
	mode  fs.FileMode
}

// snapshot is the workspace's paths with size, mtime and type, and the
// bytes of its regular files.
type snapshot struct {
	files   map[string]stamp
	bytes   int64
	partial bool
}

// takeSnapshot walks dir without following symlinks.
func takeSnapshot(dir string) snapshot {
	s := snapshot{files: map[string]stamp{}}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if len(s.files) >= maxSnapshotEntries {
			s.partial = true
			return fs.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil
		}
		s.files[filepath.ToSlash(rel)] = stamp{size: info.Size(), mtime: info.ModTime(), mode: info.Mode().Type()}
		if info.Mode().IsRegular() {
			s.bytes += info.Size()
		}
		return nil
	})
	return s
}

// paths are the regular files the snapshot saw, sorted.
func (s snapshot) paths() []string {
	var out []string
	for p, st := range s.files {
		if st.mode.IsRegular() {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// FileChange is a path of the workspace a run created, changed or deleted.
type FileChange struct {
	Path   string `json:"path"`
	Change string `json:"change"` // created, changed, deleted
	Type   string `json:"type,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// diff lists what changed from before to after, directories left out
// unless created or deleted, sorted by path.
func diff(before, after snapshot) []FileChange {
	var out []FileChange
	for p, a := range after.files {
		b, ok := before.files[p]
		switch {
		case !ok:
			out = append(out, FileChange{Path: p, Change: "created", Type: typeName(a.mode), Size: sizeOf(a)})
		case b.mode != a.mode || (a.mode.IsRegular() && (b.size != a.size || !b.mtime.Equal(a.mtime))) ||
			(a.mode&fs.ModeSymlink != 0 && !b.mtime.Equal(a.mtime)):
			out = append(out, FileChange{Path: p, Change: "changed", Type: typeName(a.mode), Size: sizeOf(a)})
		}
	}
	for p, b := range before.files {
		if _, ok := after.files[p]; !ok {
			out = append(out, FileChange{Path: p, Change: "deleted", Type: typeName(b.mode)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func sizeOf(s stamp) int64 {
	if s.mode.IsRegular() {
		return s.size
	}
	return 0
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
