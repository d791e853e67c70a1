package services

// Flags are the rollout flags, read once at start:
//
//	WRITE READ
//	  0    0   legacy: scope columns take their defaults; only the global summary
//	  1    0   dual-write: explicit scopes, summaries to global and main; prompts as legacy
//	  1    1   scoped: main prompts read the main scope and summary; sub-agents allowed
//	  0    1   refused (Validate)
//
// SubAgents runs delegated tasks as sub-agents in their own scopes; off (or
// with ScopedRead off) they run inline in main.
type Flags struct {
	ScopedWrite bool // AGENT_CONTEXT_SCOPED_WRITE
	ScopedRead  bool // AGENT_CONTEXT_SCOPED_READ
	SubAgents   bool // AGENT_SUBAGENTS
	// NoGlobalWrite stops writing the legacy 'global' summary once 'main'
	// is verified (AGENT_CONTEXT_GLOBAL_WRITE=0; needs ScopedWrite): one
	// summary call per compaction instead of two. The global cursor then
	// stays where it was (docs/ROLLOUT.md says what a rollback reads).
	NoGlobalWrite bool
	// Origin says why WRITE and READ have these values, for the owner
	// (/status, /subagents, the debug page): set by the variables, or by
	// what the database is when they are unset (docs/ROLLOUT.md).
	Origin string
}

// Origins of the flags' values (Flags.Origin).
const (
	FlagsFromEnv      = "set by AGENT_CONTEXT_SCOPED_WRITE and AGENT_CONTEXT_SCOPED_READ"
	FlagsFromNewDB    = "the default for a database this version created (AGENT_CONTEXT_SCOPED_WRITE and AGENT_CONTEXT_SCOPED_READ are unset)"
	FlagsFromLegacyDB = "the default for a database holding conversations from before context scopes: set AGENT_CONTEXT_SCOPED_WRITE=1, then AGENT_CONTEXT_SCOPED_READ=1 to switch (docs/ROLLOUT.md)"
)

// Validate refuses the one combination that would read scopes nobody writes.
func (f Flags) Validate() error {
	if f.ScopedRead && !f.ScopedWrite {
		return Errorf(EINVALID, "AGENT_CONTEXT_SCOPED_READ=1 needs AGENT_CONTEXT_SCOPED_WRITE=1: the scoped read path reads rows and summaries only the scoped write path produces (turn WRITE on first, see docs/ROLLOUT.md)")
	}
	if f.NoGlobalWrite && !f.ScopedWrite {
		return Errorf(EINVALID, "AGENT_CONTEXT_GLOBAL_WRITE=0 needs AGENT_CONTEXT_SCOPED_WRITE=1: without scoped writes the global summary is the only one written (see docs/ROLLOUT.md)")
	}
	return nil
}

// Mode names the combination: legacy, dual-write or scoped.
func (f Flags) Mode() string {
	switch {
	case f.ScopedWrite && f.ScopedRead:
		return "scoped"
	case f.ScopedWrite:
		return "dual-write"
	default:
		return "legacy"
	}
}

// SubAgentsOn reports whether delegated tasks run as sub-agents (in their
// own scopes) rather than inline in main.
func (f Flags) SubAgentsOn() bool { return f.SubAgents && f.ScopedRead }

// Map is the flags as the owner sees them (/api/whoami, the debug page):
// each variable's 0/1 and the mode.
func (f Flags) Map() map[string]string {
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	return map[string]string{
		"AGENT_CONTEXT_SCOPED_WRITE": b(f.ScopedWrite),
		"AGENT_CONTEXT_SCOPED_READ":  b(f.ScopedRead),
		"AGENT_SUBAGENTS":            b(f.SubAgents),
		"AGENT_CONTEXT_GLOBAL_WRITE": b(!f.NoGlobalWrite),
		"mode":                       f.Mode(),
		"origin":                     f.Origin,
	}
}

// Describe says in plain words how the conversation's context and
// delegated tasks work under these flags (for /status and /subagents; the
// exact variables are on the debug page).
func (f Flags) Describe() string {
	var ctx string
	switch f.Mode() {
	case "scoped":
		ctx = "each agent keeps its own context (the main conversation reads only its own summary)"
	case "dual-write":
		ctx = "one shared context, with each agent's own context being recorded for a later switch"
	default:
		ctx = "one shared context for everything"
	}
	out := ctx + "; " + f.DelegationReason()
	if f.Origin != "" {
		out += " (mode " + f.Mode() + ": " + f.Origin + ")"
	}
	return out
}

// DelegationReason says where delegated tasks run, and why.
func (f Flags) DelegationReason() string {
	switch {
	case f.SubAgentsOn():
		return "delegated tasks run as sub-agents, each in its own workspace scope"
	case !f.SubAgents:
		return "delegated tasks run inline in the main conversation because sub-agents are turned off"
	default:
		return "delegated tasks run inline in the main conversation because sub-agents need each agent's own context, which is not turned on yet (AGENT_CONTEXT_SCOPED_READ=1)"
	}
}
