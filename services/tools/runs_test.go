package tools

import (
	"strings"
	"testing"
)

// TestToolsWithoutTheirCollaboratorsFailToRegister: a tool the app builds
// without what it needs does not register (start-up fails naming it), and
// the registry is left without it.
func TestToolsWithoutTheirCollaboratorsFailToRegister(t *testing.T) {
	for name, register := range map[string]func(*Registry) error{
		"send_file":      SendFile{}.Register,
		"propose_rule":   ProposeRule{}.Register,
		"recall tools":   Recall{}.Register,
		"schedule tools": ScheduleTools{}.Register,
	} {
		reg := NewRegistry(nil)
		err := register(reg)
		if err == nil || !strings.HasPrefix(err.Error(), name+":") {
			t.Errorf("%s without collaborators: %v, want an error naming it", name, err)
		}
		if n := len(reg.List()); n != 0 {
			t.Errorf("%s: %d tools registered after the error", name, n)
		}
	}
}
