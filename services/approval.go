package services

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"
)

// ApprovalState is where an approval is.
type ApprovalState string

// Approval states. pending → approved | denied | timed_out | cancelled;
// approved → executing → executed | interrupted. Each transition is one
// conditional update, so exactly one decision wins and a call is executed
// at most once.
const (
	ApprovalPending     ApprovalState = "pending"
	ApprovalApproved    ApprovalState = "approved"
	ApprovalDenied      ApprovalState = "denied"
	ApprovalTimedOut    ApprovalState = "timed_out"
	ApprovalCancelled   ApprovalState = "cancelled"
	ApprovalExecuting   ApprovalState = "executing"
	ApprovalExecuted    ApprovalState = "executed"
	ApprovalInterrupted ApprovalState = "interrupted"
)

// Approval is one tool call held for the owner's decision (approvals).
type Approval struct {
	ID               int64           `json:"id"`
	RunID            int64           `json:"run_id"`
	TimelineScope    string          `json:"timeline"`
	ContextScope     string          `json:"context_scope"`
	TriggerMessageID int64           `json:"trigger_message_id,omitempty"`
	CallID           string          `json:"call_id"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Effect           Effect          `json:"effect"`
	// TaintedBy is the origin that tainted the run ("after reading …").
	TaintedBy string        `json:"tainted_by,omitempty"`
	State     ApprovalState `json:"state"`
	// Detached: the run that asked did not wait (a sub-agent's or a fire's
	// call); an approved call runs on its own and its result is posted to
	// the owner.
	Detached    bool   `json:"detached,omitempty"`
	ResumeRunID int64  `json:"resume_run_id,omitempty"`
	DecidedBy   string `json:"decided_by,omitempty"`
	Result      string `json:"result,omitempty"`
	// Request is the text the owner was asked with (secrets masked), as
	// the agent lists an approval; not stored.
	Request   string     `json:"request,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
}

// ApprovalQuery lists approvals, oldest first.
type ApprovalQuery struct {
	State ApprovalState
	// IDs lists only these approvals (a page's requests and decisions).
	IDs         []int64
	RunID       int64
	ResumeRunID int64
	// ExpiredBy lists pending approvals whose deadline is at or before it.
	ExpiredBy time.Time
	Limit     int
}

// ApprovalStore persists approvals.
type ApprovalStore interface {
	// CreateApproval stores a pending approval.
	CreateApproval(ctx context.Context, a Approval) (Approval, error)
	// GetApproval returns one; ENOTFOUND when absent.
	GetApproval(ctx context.Context, id int64) (Approval, error)
	// ListApprovals lists approvals oldest first.
	ListApprovals(ctx context.Context, q ApprovalQuery) ([]Approval, error)
	// TransitionApproval moves an approval from one state to another in
	// one statement (by and result recorded when not empty); ECONFLICT
	// naming its state when it is not in from, ENOTFOUND when absent.
	TransitionApproval(ctx context.Context, id int64, from, to ApprovalState, by, result string) (Approval, error)
	// SetApprovalResume records the run that resumes after the decision of
	// the approvals of run runID.
	SetApprovalResume(ctx context.Context, runID, resumeRunID int64) error
}

// ApprovalDecider decides approvals (the chat commands, the REST API).
type ApprovalDecider interface {
	// DecideApproval approves or denies a pending approval on behalf of
	// the owner through channel; ECONFLICT when already decided (the
	// message says how), ENOTFOUND when absent.
	DecideApproval(ctx context.Context, id int64, approve bool, channel string) (Approval, error)
	// ListApprovals lists approvals (pending first when state is "").
	ListApprovals(ctx context.Context, q ApprovalQuery) ([]Approval, error)
	// Policy returns the policy in force.
	Policy() *Policy
}

// Secrets are the service's own secrets: they never reach a prompt, and an
// outbound tool argument holding one is refused (SECRET_IN_ARGUMENTS).
type Secrets struct {
	values []string
}

// NewSecrets keeps the non-trivial values (at least 8 characters).
func NewSecrets(values ...string) *Secrets {
	s := &Secrets{}
	s.Add(values...)
	return s
}

// Add adds values (shorter than 8 characters are ignored: too common to mask).
func (s *Secrets) Add(values ...string) {
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) >= 8 {
			s.values = append(s.values, v)
		}
	}
}

// Len is how many secrets are held.
func (s *Secrets) Len() int {
	if s == nil {
		return 0
	}
	return len(s.values)
}

// Contains reports whether text holds a secret, as is, URL-escaped or
// JSON-escaped.
func (s *Secrets) Contains(text string) bool {
	if s == nil {
		return false
	}
	variants := []string{text}
	if u, err := url.QueryUnescape(text); err == nil {
		variants = append(variants, u)
	}
	var unq string
	if json.Unmarshal([]byte(`"`+strings.ReplaceAll(text, `"`, `\"`)+`"`), &unq) == nil {
		variants = append(variants, unq)
	}
	for _, v := range s.values {
		for _, t := range variants {
			if strings.Contains(t, v) {
				return true
			}
		}
	}
	return false
}

// Mask replaces every secret in text with [secret].
func (s *Secrets) Mask(text string) string {
	if s == nil {
		return text
	}
	for _, v := range s.values {
		text = strings.ReplaceAll(text, v, "[secret]")
	}
	return text
}
