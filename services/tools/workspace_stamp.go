package tools

import (
	"time"

	"github.com/switchboard/switchboard/services"
)

// FileStamp is a workspace file's size and modification time, for the
// ContextManager to read a file again only when it changed (the todo
// recap's files). Errors as ReadFile's: ENOTFOUND for a missing file,
// EINVALID for a refused path or a directory.
func (s *Workspaces) FileStamp(timelineScope, path string) (int64, time.Time, error) {
	w, err := s.For(timelineScope)
	if err != nil {
		return 0, time.Time{}, err
	}
	rel, err := w.Resolve(path)
	if err != nil {
		return 0, time.Time{}, err
	}
	info, err := w.root.Stat(rel)
	if err != nil {
		return 0, time.Time{}, fsError("stat", path, err)
	}
	if info.IsDir() {
		return 0, time.Time{}, services.Errorf(services.EINVALID, "%q is a directory", path)
	}
	return info.Size(), info.ModTime(), nil
}
