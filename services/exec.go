package services

// ExecStatus is what /status and /tools say of the exec tool: whether it
// is turned on (EXEC_ENABLED), why its sandbox does not work when it does
// not (then the tool is not offered), and the sandbox's limits in one
// line. The zero value says nothing.
type ExecStatus struct {
	Enabled bool
	Reason  string
	Limits  string
}

// Offered reports whether the exec tool is registered.
func (s ExecStatus) Offered() bool { return s.Enabled && s.Reason == "" }
