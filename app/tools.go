package app

import (
	"fmt"

	"github.com/switchboard/switchboard/services/fetch"
	"github.com/switchboard/switchboard/services/sandbox"
	"github.com/switchboard/switchboard/services/tools"
)

// toolSet is one entry of the agent's tool list: the tools it adds, when
// this instance offers them, and how they are added.
type toolSet struct {
	names string
	on    bool
	add   func(*tools.Registry) error
}

// toolList is every built-in tool of the agent, in one list (MCP servers
// add theirs as each starts). A new tool is one entry here.
func (a *App) toolList() []toolSet {
	cfg := a.cfg
	return []toolSet{
		{"read_file, write_file, edit_file, read_block, replace_block, list_files, search", true,
			func(r *tools.Registry) error { return tools.RegisterWorkspaceTools(r, a.spaces.For) }},
		{tools.TodoName, true, func(r *tools.Registry) error { return r.Register(tools.Todo(a.spaces.For)) }},
		{"remember", true, func(r *tools.Registry) error { return tools.RegisterRemember(r, a.store) }},
		{"fetch_url", true, func(r *tools.Registry) error {
			if err := fetch.Register(r, cfg.Fetch); err != nil {
				return fmt.Errorf("FETCH_ALLOW: %w", err)
			}
			return nil
		}},
		{"web_search", cfg.Search.URL != "", func(r *tools.Registry) error { return fetch.RegisterSearch(r, cfg.Search) }},
		// Never without a working sandbox (probed in New).
		{"exec", a.execStatus.Offered(),
			func(r *tools.Registry) error { return r.Register(sandbox.Tool(a.sandbox, a.spaces.For)) }},
		{"delegate", true, a.agent.RegisterDelegate},
		{"schedule, update_schedule, cancel_schedule, list_schedules", true,
			tools.ScheduleTools{Schedules: a.scheduler, Zones: a.scheduler}.Register},
		{"send_file", true, tools.SendFile{Media: a.media, Chat: a.chat, Runs: a.store}.Register},
		{"recall_search, recall_timeline, recall_detail", true,
			tools.Recall{Archive: a.store, Runs: a.store, Window: a.context, Tokens: a.tokenizer}.Register},
		{"propose_rule", true, tools.ProposeRule{Proposals: a.store, Chat: a.chat, Runs: a.store}.Register},
		// Deferred tools are found through it (TOOLS_DEFER_OVER).
		{tools.FindToolsName, cfg.Agent.ToolsDeferOver > 0, func(r *tools.Registry) error { return r.Register(tools.FindTools()) }},
	}
}

// registerTools adds every tool this instance offers to the registry; a
// tool that does not register fails start-up.
func (a *App) registerTools() error {
	for _, t := range a.toolList() {
		if !t.on {
			continue
		}
		if err := t.add(a.registry); err != nil {
			return fmt.Errorf("tools %s: %w", t.names, err)
		}
	}
	return nil
}
