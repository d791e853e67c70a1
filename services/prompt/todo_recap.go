package prompt

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/services"
)

// TodoListHeading opens the scope's task list (the todo tool's) in the
// todo recap.
const TodoListHeading = "Your task list (set with the todo tool; call it again to tick items off or change them):"

// maxRecapFiles bounds the recap files a Manager remembers.
const maxRecapFiles = 512

// recapFiles remembers the todo recap's files by (timeline, path), with
// the size and modification time they were read at.
type recapFiles struct {
	mu    sync.Mutex
	files map[[2]string]recapFile
}

type recapFile struct {
	size  int64
	mtime time.Time
	data  []byte
}

// todoRead reads a file of the todo recap: from memory when its size and
// modification time are those it was read at, else from the workspace.
func (m *Manager) todoRead(timeline, path string) ([]byte, error) {
	size, mtime, err := m.opts.Workspace.FileStamp(timeline, path)
	if err != nil {
		return nil, err
	}
	key := [2]string{timeline, path}
	c := &m.recap
	c.mu.Lock()
	f, hit := c.files[key]
	c.mu.Unlock()
	if hit && f.size == size && f.mtime.Equal(mtime) {
		return f.data, nil
	}
	data, err := m.opts.Workspace.ReadFile(timeline, path)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.files == nil || len(c.files) >= maxRecapFiles {
		c.files = map[[2]string]recapFile{}
	}
	c.files[key] = recapFile{size: size, mtime: mtime, data: data}
	c.mu.Unlock()
	return data, nil
}

// todoLayer: the scope's task list (the todo tool's, services.TodoPath),
// then the first lines of TODO.md in the workspace, when present. Each
// file a tainted run wrote last (services.TodoTaintFile) carries that
// taint, so a prompt that keeps it starts its run tainted.
func (m *Manager) todoLayer(timeline, contextScope string) textLayer {
	l := textLayer{heading: "[Todo recap]"}
	if m.opts.Workspace == nil {
		return l
	}
	var taint services.TodoTaint
	if data, err := m.todoRead(timeline, services.TodoTaintFile); err == nil {
		_ = json.Unmarshal(data, &taint)
	}
	if data, err := m.todoRead(timeline, services.TodoPath(contextScope)); err == nil {
		var items []string
		for _, ln := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(ln) != "" && len(items) < services.MaxTodoItems {
				items = append(items, ln)
			}
		}
		if len(items) > 0 {
			src := services.TodoPath(contextScope)
			by := taint.Files[services.TodoTaintKey(src)]
			l.addTainted(TodoListHeading, src, by)
			for _, it := range items {
				l.addTainted(it, src, by)
			}
		}
	}
	names, err := m.opts.Workspace.RootFiles(timeline)
	if err != nil {
		return l
	}
	for _, n := range names {
		if strings.EqualFold(n, "todo.md") {
			data, err := m.todoRead(timeline, n)
			if err != nil {
				return l
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 30 {
				lines = lines[:30]
			}
			by := taint.Files[services.TodoTaintKey(n)]
			for _, ln := range lines {
				if strings.TrimSpace(ln) != "" {
					l.addTainted(ln, n, by)
				}
			}
			return l
		}
	}
	return l
}
