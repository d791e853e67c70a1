package agent

import "github.com/switchboard/switchboard/services/tools"

// RegisterDelegate adds delegate (sub-agents; delegate.go), added to a
// registry by the app's one list of tools (app/tools.go). It is the one
// tool of the runtime itself: a call starts a child run (its row, its
// loop, its handoff in the parent's transaction), so it stays here; the
// other tools are in services/tools, given what they need by the app.
func (s *Service) RegisterDelegate(reg *tools.Registry) error { return s.registerDelegate(reg) }
