package tools

import (
	"context"
	"fmt"

	"github.com/switchboard/switchboard/services"
)

// TodoName is the todo tool's name.
const TodoName = "todo"

type todoArgs struct {
	Items []services.TodoItem `json:"items" jsonschema:"The whole list in order; it replaces the one before. An empty list clears it."`
}

type todoResult struct {
	Items int    `json:"items"`
	Done  int    `json:"done"`
	Note  string `json:"note"`
}

// Todo is the todo tool: the calling agent sets its short task list for its
// context scope (services.TodoPath in the timeline's workspace). The list
// is not repeated in history (its results keep one line there): each
// prompt of the scope ends with it, in the todo recap.
func Todo(ws WorkspaceFor) Tool {
	return Func(TodoName, services.EffectWorkspace, fmt.Sprintf("Set your task list for this task: the whole list, each "+
		"item one line with done true or false (at most %d items). The list is shown to you at the end of every "+
		"prompt; call again to tick items off or change it.", services.MaxTodoItems),
		func(ctx context.Context, call Call, a todoArgs) (Result, error) {
			if err := services.CheckTodo(a.Items); err != nil {
				return Result{}, badArgument("argument \"items\": %s", services.ErrorMessage(err))
			}
			w, err := workspaceTools{ws: ws}.workspace(call)
			if err != nil {
				return Result{}, err
			}
			if _, _, err := w.WriteFile(services.TodoPath(call.ContextScope), []byte(services.FormatTodo(a.Items)), false); err != nil {
				return Result{}, err
			}
			// A list set by a tainted run carries its taint into the recap.
			if err := w.noteRecapWrite(call, services.TodoPath(call.ContextScope), true); err != nil {
				return Result{}, err
			}
			done := 0
			for _, it := range a.Items {
				if it.Done {
					done++
				}
			}
			return JSONResult(todoResult{Items: len(a.Items), Done: done, Note: "The list is shown at the end of your prompt."})
		}).WithHistory(HistoryRule{MaxChars: 200, Form: LineForm(func(r map[string]any) string {
		return fmt.Sprintf("[task list set: %d items, %d done; the current list is the todo recap at the end of the prompt]",
			fieldInt(r, "items"), fieldInt(r, "done"))
	})})
}
