package tools

import (
	"io"
	"os"
	"sort"

	"github.com/switchboard/switchboard/services"
)

// maxContextFileBytes bounds what ReadFile returns for prompts.
const maxContextFileBytes = 256 << 10

// ReadFile reads a file of a timeline's workspace through the same sandbox
// as the tools (for the ContextManager: rules file, references, todo list).
// Errors: EINVALID for a refused path, ENOTFOUND for a missing file.
func (s *Workspaces) ReadFile(timelineScope, path string) ([]byte, error) {
	w, err := s.For(timelineScope)
	if err != nil {
		return nil, err
	}
	f, info, err := w.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info.IsDir() {
		return nil, services.Errorf(services.EINVALID, "%q is a directory", path)
	}
	return io.ReadAll(io.LimitReader(f, maxContextFileBytes))
}

// RootFiles lists the regular files at the root of a timeline's workspace
// (an empty list when the workspace has none yet).
func (s *Workspaces) RootFiles(timelineScope string) ([]string, error) {
	w, err := s.For(timelineScope)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(w.Dir())
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}
