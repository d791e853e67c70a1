package services

import (
	"context"
	"encoding/json"
	"time"
)

// Audit actions: what an AuditEntry records.
const (
	AuditToolCall       = "tool_call"       // a call of class persist, egress, external, destructive or exec, with its result status
	AuditApproval       = "approval"        // an approval asked, approved, denied or timed out
	AuditRuleChange     = "rule_change"     // a rule added, removed, approved, rejected
	AuditMemoryChange   = "memory_change"   // a memory item stored, proposed, approved, forgotten
	AuditScheduleChange = "schedule_change" // a schedule created, changed, paused, resumed, deleted
	AuditPolicyChange   = "policy_change"   // the policy in force changed
	AuditLogin          = "login"           // an owner login (token or link)
	AuditTokenReset     = "token_reset"     // the owner token was reset
	AuditPairing        = "pairing"         // a stranger asked, was approved, denied or revoked
	AuditSecretRefused  = "secret_refused"  // an outbound argument carried a secret of the service
)

// AuditEntry is one row of the append-only, hash-chained audit trail: an
// action with a lasting or outbound effect, or a decision about one. Rows
// are never updated or deleted; each row's Hash covers its fields and the
// previous row's Hash, so `switchboard audit verify` finds the first row
// changed after it was written.
type AuditEntry struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// Actor is who acted or decided: "owner", "agent", "service", or
	// "stranger:<telegram id>".
	Actor string `json:"actor"`
	// Channel is where a decision came from (web, telegram, tui, api, cli,
	// system), or "" for the agent's own calls.
	Channel string `json:"channel,omitempty"`
	// Action is one of the Audit* constants.
	Action string `json:"action"`
	// Subject names what was acted on: a tool name, a rule or schedule id.
	Subject string `json:"subject,omitempty"`
	// RunID is the run the action belongs to, 0 if none.
	RunID int64 `json:"run_id,omitempty"`
	// TimelineScope is the timeline the action belongs to ("" if none).
	TimelineScope string `json:"timeline,omitempty"`
	// Status is the outcome: "ok", "error", "asked", "approved", "denied",
	// "timed_out", "refused", ...
	Status string `json:"status,omitempty"`
	// Detail holds the arguments or other particulars, secrets masked.
	Detail json.RawMessage `json:"detail,omitempty"`
	// PrevHash and Hash chain the rows (hex SHA-256).
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// AuditLog appends to and reads the audit trail.
type AuditLog interface {
	// AppendAudit adds e at the end of the chain (ID, At, PrevHash and Hash
	// are set by the store) and returns the stored row. Appends are
	// serialised so the chain has one order.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// ListAudit returns the rows at or after since, oldest first, at most
	// limit (0: all).
	ListAudit(ctx context.Context, since time.Time, limit int) ([]AuditEntry, error)
	// VerifyAudit walks the chain from the first row. It returns the number
	// of rows checked and, when a row's hash does not match its content or
	// its predecessor, that row (nil when the chain is whole).
	VerifyAudit(ctx context.Context) (int, *AuditEntry, error)
}
