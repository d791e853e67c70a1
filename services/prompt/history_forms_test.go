package prompt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/tools"
)

// formRules are the history rules of the workspace tools, the recall
// search and the todo tool, as the tool registry gives them.
func formRules(t *testing.T) func(string) (prompt.CompressionRule, bool) {
	reg := tools.NewRegistry(nil)
	if err := tools.RegisterWorkspaceTools(reg, func(string) (*tools.Workspace, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(tools.Todo(func(string) (*tools.Workspace, error) { return nil, nil })); err != nil {
		t.Fatal(err)
	}
	recall := tools.Func("recall_search", services.EffectRead, "d", func(context.Context, tools.Call, struct{}) (tools.Result, error) {
		return tools.Result{}, nil
	}).WithHistory(tools.HistoryRule{MaxChars: 800, Form: tools.SearchForm(tools.SearchFields{Query: "query", Matches: "results", Where: []string{"id"}, Text: "text"})})
	if err := reg.Register(recall); err != nil {
		t.Fatal(err)
	}
	return func(name string) (prompt.CompressionRule, bool) {
		tl, ok := reg.Get(name)
		if !ok {
			return prompt.CompressionRule{}, false
		}
		h := tl.History
		return prompt.CompressionRule{MaxChars: h.MaxChars, KeepFields: h.KeepFields, DropFields: h.DropFields, Form: h.Form}, true
	}
}

type pastCall struct {
	name, args, result string
}

// TestHistoryFormsInAPrompt: a past turn's tool results reach the prompt
// in their history forms by tool kind (list, search, read, edit, write,
// the todo tool's one line); the newest turn's results stay whole.
func TestHistoryFormsInAPrompt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	var listing []map[string]any
	for i := range 25 {
		listing = append(listing, map[string]any{"path": fmt.Sprintf("docs/n%02d.md", i), "type": "file", "size": 10, "mtime": "2026-03-04T09:00:00Z"})
	}
	listJSON, _ := json.Marshal(map[string]any{"path": "docs", "entries": listing, "total": 25})
	var matches []map[string]any
	for i := range 9 {
		matches = append(matches, map[string]any{"file": fmt.Sprintf("src/a%d.go", i%3), "line": 10 + i, "text": "// TODO: deploy"})
	}
	searchJSON, _ := json.Marshal(map[string]any{"query": "deploy", "matches": matches, "files_searched": 40})
	var lines []string
	for i := 1; i <= 40; i++ {
		lines = append(lines, fmt.Sprintf("plan line %d", i))
	}
	readJSON, _ := json.Marshal(map[string]any{"path": "plan.md", "size": 600, "mtime": "2026-03-04T09:00:00Z", "start_line": 1, "end_line": 40,
		"content": strings.Join(lines, "\n") + "\n"})
	writeArgs, _ := json.Marshal(map[string]any{"path": "report.md", "content": strings.Join(lines, "\n") + "\n"})
	calls := []pastCall{
		{"list_files", `{"path":"docs"}`, string(listJSON)},
		{"search", `{"query":"deploy"}`, string(searchJSON)},
		{"recall_search", `{"query":"deploy date"}`, `{"query":"deploy date","results":[{"id":"m12","date":"2026-03-01 10:00Z","role":"user","tokens":30,"text":"deploy on Monday"}],"budget_tokens":500}`},
		{"read_file", `{"path":"plan.md"}`, string(readJSON)},
		{"edit_file", `{"path":"plan.md","old_text":"plan line 3","new_text":"plan line 3: ship it"}`, `{"path":"plan.md","replacements":1,"first_line":3,"size":610,"mtime":"2026-03-04T09:00:00Z"}`},
		{"write_file", string(writeArgs), `{"path":"report.md","bytes_written":520,"size":520,"mtime":"2026-03-04T09:00:00Z","created":true}`},
		{"todo", `{"items":[{"text":"read the plan","done":true},{"text":"write the report"}]}`, `{"items":2,"done":1,"note":"The list is shown at the end of your prompt."}`},
	}
	turn := func(question string, calls []pastCall) int64 {
		q, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Content: question, Visible: true})
		meta := func(m string) []byte { return []byte(fmt.Sprintf(`{"reply_to":%d,"run_id":1,%s}`, q.ID, m)) }
		var tc []string
		for i, c := range calls {
			tc = append(tc, fmt.Sprintf(`{"id":"c%d-%d","name":%q,"arguments":%s}`, q.ID, i, c.name, c.args))
		}
		if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "assistant", Source: "agent",
			Metadata: meta(`"tool_calls":[` + strings.Join(tc, ",") + `]`)}); err != nil {
			t.Fatal(err)
		}
		for i, c := range calls {
			if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "tool", Source: "agent", Content: c.result,
				Metadata: meta(fmt.Sprintf(`"tool_call_id":"c%d-%d","tool_name":%q`, q.ID, i, c.name))}); err != nil {
				t.Fatal(err)
			}
		}
		return q.ID
	}
	turn("tidy the docs", calls)
	q2 := turn("and now?", calls[5:6]) // the newest turn: its write result stays whole
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, HistoryRule: formRules(t)}, prompt.Config{Window: 64000, ScopedRead: true})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: q2})
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, msg := range p.Request.Messages {
		if msg.Role == llm.RoleTool {
			results = append(results, msg.Content)
		}
	}
	want := []string{
		"[listed docs: 25 entries (0 dirs, 25 files among the 25 returned)]\nfirst 20: docs/n00.md, docs/n01.md, docs/n02.md, docs/n03.md, docs/n04.md, docs/n05.md, docs/n06.md, docs/n07.md, docs/n08.md, docs/n09.md, docs/n10.md, docs/n11.md, docs/n12.md, docs/n13.md, docs/n14.md, docs/n15.md, docs/n16.md, docs/n17.md, docs/n18.md, docs/n19.md (and 5 more)",
		"[searched \"deploy\": 9 matches in 3 files]\nfirst 5:\nsrc/a0.go:10: // TODO: deploy\nsrc/a1.go:11: // TODO: deploy\nsrc/a2.go:12: // TODO: deploy\nsrc/a0.go:13: // TODO: deploy\nsrc/a1.go:14: // TODO: deploy\n(and 4 more)",
		"[searched \"deploy date\": 1 matches]\nfirst 1:\nm12: deploy on Monday",
		"[read plan.md, lines 1-40]\n     1\tplan line 1\n     2\tplan line 2\n",
		"[edited plan.md: 1 replacement(s), lines 3-3 now]\nplan line 3: ship it",
		"[created (new file) report.md: 520 bytes written, 40 lines; the file is 520 bytes]\nfirst 30 lines:\nplan line 1\n",
		"[task list set: 2 items, 1 done; the current list is the todo recap at the end of the prompt]",
		calls[5].result,
	}
	if len(results) != len(want) {
		t.Fatalf("%d tool results, want %d: %q", len(results), len(want), results)
	}
	for i, w := range want {
		if !strings.HasPrefix(results[i], w) {
			t.Errorf("result %d:\n%s\nwant it to start with\n%s", i, results[i], w)
		}
	}
	if !strings.Contains(results[3], "    40\tplan line 40") || !strings.Contains(results[5], "plan line 30\n[10 more lines not kept in history]") {
		t.Errorf("read or write form: %q %q", results[3], results[5])
	}
	// The growth of the write form over its stored row is counted.
	if p.Inspection.TotalTokens > p.Inspection.Budget {
		t.Fatalf("total %d over budget %d", p.Inspection.TotalTokens, p.Inspection.Budget)
	}
}

// TestTodoRecapEndsThePrompt: the scope's task list (the todo tool's file)
// is the todo recap at the end of the current input, after the @path
// reminder, before TODO.md's lines; another scope's list is not in it.
func TestTodoRecapEndsThePrompt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	space := mapSpace{files: map[string]string{
		services.TodoPath("main"):        "- [x] read the plan\n- [ ] write the report\n",
		services.TodoPath("sub:coder:9"): "- [ ] a sub-agent's step\n",
	}}
	q, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Content: "summarise @notes.md", Visible: true})
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Workspace: space}, prompt.Config{Window: 16000, ScopedRead: true})
	p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: q.ID})
	if err != nil {
		t.Fatal(err)
	}
	last := p.Request.Messages[len(p.Request.Messages)-1].Content
	want := "[Todo recap]\n" + prompt.TodoListHeading + "\n- [x] read the plan\n- [ ] write the report"
	if !strings.HasSuffix(last, want) || !strings.Contains(last, "@notes.md") || strings.Index(last, "notes.md") > strings.Index(last, "[Todo recap]") {
		t.Fatalf("the last message:\n%s", last)
	}
	if strings.Contains(last, "sub-agent's step") {
		t.Fatal("another scope's list is in main's recap")
	}
}
