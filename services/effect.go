package services

import "fmt"

// Effect is the class of what a tool call can change or send out. The
// policy (docs/SECURITY.md) decides per effect class, per who started a run
// and whether the run is tainted, whether a call is allowed, must wait for
// the owner's approval, or is refused. Every tool declares one; a tool
// without a valid class is refused at registration.
type Effect string

const (
	// EffectRead has no lasting effect and sends nothing out.
	EffectRead Effect = "read"
	// EffectWorkspace writes inside the conversation's workspace only.
	EffectWorkspace Effect = "workspace"
	// EffectPersist changes what future runs see or do: memory, rule
	// proposals, schedules, context pins.
	EffectPersist Effect = "persist"
	// EffectEgress sends data out of the machine: a fetch, a search, a file
	// sent to someone other than the owner.
	EffectEgress Effect = "egress"
	// EffectExternal is a tool of an MCP server not known to be read-only:
	// it may act on the owner's accounts elsewhere.
	EffectExternal Effect = "external"
	// EffectDestructive deletes or overwrites something that cannot be
	// restored from the service (an MCP tool marked destructiveHint, a
	// schedule's deletion).
	EffectDestructive Effect = "destructive"
	// EffectExec runs a program in the sandbox.
	EffectExec Effect = "exec"
)

// Effects lists every effect class, from least to most consequential.
var Effects = []Effect{EffectRead, EffectWorkspace, EffectPersist, EffectEgress, EffectExternal, EffectDestructive, EffectExec}

// Valid reports whether e is one of Effects.
func (e Effect) Valid() bool {
	for _, x := range Effects {
		if e == x {
			return true
		}
	}
	return false
}

// ParseEffect returns the effect class named s, or EINVALID naming the classes.
func ParseEffect(s string) (Effect, error) {
	e := Effect(s)
	if !e.Valid() {
		return "", Errorf(EINVALID, "unknown effect class %q (one of read, workspace, persist, egress, external, destructive, exec)", s)
	}
	return e, nil
}

// String returns the class's name.
func (e Effect) String() string { return string(e) }

var _ fmt.Stringer = EffectRead
