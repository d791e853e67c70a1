package services

import (
	"fmt"
	"strings"
)

// TodoItem is one entry of an agent's task list (the todo tool): what to
// do and whether it is done.
type TodoItem struct {
	Text string `json:"text" jsonschema:"One step, one line."`
	Done bool   `json:"done,omitempty" jsonschema:"The step is done."`
}

// Bounds of a task list.
const (
	MaxTodoItems     = 20
	MaxTodoItemBytes = 200
)

// TodoDir holds the task lists in a timeline's workspace, one file per
// context scope.
const TodoDir = ".todo"

// TodoPath is where a context scope's task list is kept in its timeline's
// workspace: .todo/<scope>.md, the scope's ":" written "_" ("main":
// .todo/main.md, "sub:coder:42": .todo/sub_coder_42.md).
func TodoPath(contextScope string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			return r
		}
		return '_'
	}, contextScope)
	if name == "" {
		name = MainScope
	}
	return TodoDir + "/" + name + ".md"
}

// CheckTodo refuses a list that is too long, or an item that is empty, too
// long or more than one line (EINVALID, naming it).
func CheckTodo(items []TodoItem) error {
	if len(items) > MaxTodoItems {
		return Errorf(EINVALID, "the list has %d items; at most %d", len(items), MaxTodoItems)
	}
	for i, it := range items {
		switch t := strings.TrimSpace(it.Text); {
		case t == "":
			return Errorf(EINVALID, "item %d is empty", i+1)
		case len(t) > MaxTodoItemBytes:
			return Errorf(EINVALID, "item %d is %d bytes; at most %d", i+1, len(t), MaxTodoItemBytes)
		case strings.ContainsAny(t, "\r\n"):
			return Errorf(EINVALID, "item %d has more than one line", i+1)
		}
	}
	return nil
}

// FormatTodo writes a task list as a Markdown checklist, one line an item
// ("- [x] done step", "- [ ] open step").
func FormatTodo(items []TodoItem) string {
	var b strings.Builder
	for _, it := range items {
		box := " "
		if it.Done {
			box = "x"
		}
		fmt.Fprintf(&b, "- [%s] %s\n", box, strings.TrimSpace(it.Text))
	}
	return b.String()
}

// TodoTaintFile records which files of the todo recap (a scope's task
// list under TodoDir, TODO.md at the workspace root) a tainted run wrote
// last, and the untrusted sources behind it: JSON {"files": {path:
// tainted_by}}. The service writes it; the agent's write tools may not.
const TodoTaintFile = TodoDir + "/taint.json"

// FileTaintFile records, in TodoTaint's shape, every other workspace file
// a tainted run wrote last (its slash path relative to the root) and the
// untrusted sources behind it: a run that reads one is tainted by it. The
// service writes it; the agent's write tools may not.
const FileTaintFile = TodoDir + "/files-taint.json"

// TodoTaint is TodoTaintFile's content.
type TodoTaint struct {
	Files map[string]string `json:"files"`
}

// TodoTaintKey is the key TodoTaint gives a recap file (a workspace path,
// slash-separated): ".todo/<scope>.md" as it is, TODO.md at the root in
// lower case (it is found in any case); "" for a file of no recap.
func TodoTaintKey(p string) string {
	p = strings.TrimPrefix(strings.ReplaceAll(p, `\`, "/"), "./")
	switch {
	case strings.EqualFold(p, "todo.md"):
		return "todo.md"
	case strings.HasPrefix(p, TodoDir+"/") && strings.HasSuffix(p, ".md") && !strings.Contains(p[len(TodoDir)+1:], "/"):
		return p
	}
	return ""
}
