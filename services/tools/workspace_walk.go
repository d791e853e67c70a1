package tools

import (
	"io/fs"
	"strings"
)

// WalkFiles calls fn with the path (slash-separated, relative to the
// workspace) and size of every regular file of a timeline's workspace, in
// lexical order, inside the workspace's root (symlinks are not followed);
// hidden files and directories (".name") are left out. fn returning
// fs.SkipAll stops the walk. For the workspace map of the context payload.
func (s *Workspaces) WalkFiles(timelineScope string, fn func(path string, size int64) error) error {
	w, err := s.For(timelineScope)
	if err != nil {
		return err
	}
	err = fs.WalkDir(w.root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable entry is left out
		}
		if path != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		return fn(path, info.Size())
	})
	if err == fs.SkipAll {
		return nil
	}
	return err
}
