package agent

import (
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
	"github.com/switchboard/switchboard/services/tools"
)

// selectTools splits the tools a run may use into the definitions its
// requests carry (core first, find_tools last) and its Toolbox of deferred
// tools (nil: nothing deferred, the request carries every tool as before).
// core names the always-loaded tools (nil: the configured core set, or
// tools.DefaultCore when none is configured).
func (s *Service) selectTools(all []tools.Tool, core []string) ([]services.ToolSpec, *tools.Toolbox) {
	if core == nil {
		core = s.opts.ToolsCore
	}
	if core == nil {
		core = tools.DefaultCore
	}
	find, _ := s.opts.Tools.Get(tools.FindToolsName)
	return tools.Select(all, tools.Selection{Core: core, DeferOver: s.opts.ToolsDeferOver, Tokens: s.toolTokens}, find)
}

func (s *Service) toolTokens(t services.ToolSpec) int { return prompt.ToolTokens(s.opts.Tokenizer, t) }

// mainTools are the tools of a main run of k on timeline: its request's
// definitions and its deferred tools (Groups: their one line per group for
// the system prompt), of those the policy offers it.
func (s *Service) mainTools(timeline string, k services.PolicyKey) ([]services.ToolSpec, *tools.Toolbox) {
	return s.selectTools(s.toolsFor(timeline, k), s.mainCore())
}

// mainCore is a main run's core set: the configured one (TOOLS_CORE);
// unset, tools.CoordinatorCore when delegated tasks run as sub-agents
// (main coordinates; its sub-agents do the work with the default core),
// else tools.DefaultCore.
func (s *Service) mainCore() []string {
	switch {
	case s.opts.ToolsCore != nil:
		return s.opts.ToolsCore
	case s.opts.Flags.SubAgentsOn():
		return tools.CoordinatorCore
	default:
		return tools.DefaultCore
	}
}

// withLoaded is the tools of a loop's next request: the first request's,
// then those the run loaded, in load order (after the cached prefix).
func (l loopSpec) withLoaded() []services.ToolSpec {
	if l.box == nil {
		return l.req.Tools
	}
	loaded := l.box.Specs()
	if len(loaded) == 0 {
		return l.req.Tools
	}
	return append(append(make([]services.ToolSpec, 0, len(l.req.Tools)+len(loaded)), l.req.Tools...), loaded...)
}
