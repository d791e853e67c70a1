package agent

import "github.com/switchboard/switchboard/services/tools"

// The agent's own tools, each added to a registry by the app's one list of
// tools (app/tools.go); an error there fails start-up.

// RegisterDelegate adds delegate (sub-agents; delegate.go).
func (s *Service) RegisterDelegate(reg *tools.Registry) error { return s.registerDelegate(reg) }

// RegisterScheduleTools adds schedule, update_schedule, cancel_schedule and
// list_schedules (schedule_tools.go); it needs Deps.Schedules.
func (s *Service) RegisterScheduleTools(reg *tools.Registry) error {
	return s.registerScheduleTools(reg)
}

// RegisterSendFile adds send_file (send_file.go); it needs Deps.Media.
func (s *Service) RegisterSendFile(reg *tools.Registry) error { return s.registerSendFile(reg) }

// RegisterRecallTools adds recall_search, recall_timeline and
// recall_detail (recall_tool.go); they need Deps.Recall.
func (s *Service) RegisterRecallTools(reg *tools.Registry) error {
	return s.registerRecallTools(reg)
}

// RegisterProposeRule adds propose_rule (rules_tool.go); it needs
// Deps.Proposals.
func (s *Service) RegisterProposeRule(reg *tools.Registry) error {
	return s.registerProposeRule(reg)
}
