package services

import (
	"strings"
	"testing"
)

// TestFlagsSayWhy: /status and /subagents tell the owner which mode runs,
// why, and which variable changes it.
func TestFlagsSayWhy(t *testing.T) {
	legacy := Flags{SubAgents: true, Origin: FlagsFromLegacyDB}
	d := legacy.Describe()
	for _, want := range []string{"one shared context", "mode legacy", "AGENT_CONTEXT_SCOPED_WRITE=1", "AGENT_CONTEXT_SCOPED_READ=1"} {
		if !strings.Contains(d, want) {
			t.Errorf("legacy database: %q lacks %q", d, want)
		}
	}
	if r := (Flags{SubAgents: true}).DelegationReason(); !strings.Contains(r, "AGENT_CONTEXT_SCOPED_READ=1") {
		t.Errorf("sub-agents waiting for scoped reads: %q names no variable", r)
	}
	scoped := Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true, Origin: FlagsFromNewDB}
	if d := scoped.Describe(); !strings.Contains(d, "mode scoped") || !strings.Contains(d, "database this version created") {
		t.Errorf("new database: %q", d)
	}
	if m := scoped.Map(); m["mode"] != "scoped" || m["origin"] != FlagsFromNewDB {
		t.Errorf("debug map: %v", m)
	}
}
