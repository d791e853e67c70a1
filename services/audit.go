package services

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
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

// AuditGenesis is the PrevHash of the first row of the chain.
const AuditGenesis = "0000000000000000000000000000000000000000000000000000000000000000"

// AuditTimeLayout is how At enters the hash: UTC, microseconds (the
// precision PostgreSQL stores).
const AuditTimeLayout = "2006-01-02T15:04:05.000000Z"

// AuditHash is the hash of e as it is stored: hex SHA-256 over
// AuditCanonical(e). Detail must be in its stored form (PostgreSQL's text
// form of the jsonb value), which is what a store reads back.
func AuditHash(e AuditEntry) string {
	sum := sha256.Sum256(AuditCanonical(e))
	return hex.EncodeToString(sum[:])
}

// AuditCanonical is the byte string a row's hash covers: a compact JSON
// array, written by encoding/json without HTML escaping, of
// [prev_hash, id, at, actor, channel, action, subject, run_id,
// timeline_scope, status, detail] where at is in AuditTimeLayout and detail
// is the jsonb text as a JSON string.
func AuditCanonical(e AuditEntry) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode([]any{e.PrevHash, e.ID, e.At.UTC().Format(AuditTimeLayout), e.Actor, e.Channel, e.Action,
		e.Subject, e.RunID, e.TimelineScope, e.Status, string(e.Detail)})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// AuditCheck compares a stored row with the hash of the row before it
// (AuditGenesis for the first) and says what does not match ("" when the
// link is whole).
func AuditCheck(prevHash string, e AuditEntry) string {
	if e.PrevHash != prevHash {
		return fmt.Sprintf("prev_hash %s is not the hash of the row before it (%s): a row before it was removed, inserted or rewritten", auditShort(e.PrevHash), auditShort(prevHash))
	}
	if h := AuditHash(e); h != e.Hash {
		return fmt.Sprintf("hash %s does not match the row's content (computed %s): the row was altered after it was written", auditShort(e.Hash), auditShort(h))
	}
	return ""
}

func auditShort(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	if h == "" {
		return `""`
	}
	return h
}

// AuditVerdict is the result of walking the whole chain.
type AuditVerdict struct {
	// Checked counts the rows whose link held, from the first row.
	Checked int `json:"checked"`
	// Broken is the first row whose link does not hold (nil: none), and
	// Reason says what mismatched.
	Broken *AuditEntry `json:"broken,omitempty"`
	Reason string      `json:"reason,omitempty"`
	// Head is the hash of the last row checked (AuditGenesis when empty).
	Head string `json:"head"`
}

// AuditPager pages the audit trail newest first (the debug page).
type AuditPager interface {
	// AuditPage returns at most limit rows with an id below beforeID (0:
	// from the newest), newest first.
	AuditPage(ctx context.Context, beforeID int64, limit int) ([]AuditEntry, error)
}

// AuditMask returns v with every value whose key names a secret (token,
// secret, password, key, authorization, cookie) replaced by "***", for a
// Detail built from user input.
func AuditMask(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		if auditSecretKey(k) {
			out[k] = "***"
			continue
		}
		if m, ok := x.(map[string]any); ok {
			x = AuditMask(m)
		}
		out[k] = x
	}
	return out
}

func auditSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"token", "secret", "password", "passwd", "api_key", "apikey", "authorization", "cookie", "credential"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// AuditDetail encodes particulars for AuditEntry.Detail, secrets masked
// (AuditMask); nil for none.
func AuditDetail(v map[string]any) json.RawMessage {
	if len(v) == 0 {
		return nil
	}
	b, err := json.Marshal(AuditMask(v))
	if err != nil {
		return nil
	}
	return b
}

// PairingAudit is the audit entry of a pairing decision or request: status
// "asked" (actor the stranger), "approved", "denied" or "revoked" (actor
// the owner), on channel. The code is not recorded.
func PairingAudit(channel, status string, p Pairing) AuditEntry {
	actor := "owner"
	if status == "asked" {
		actor = fmt.Sprintf("stranger:%d", p.UserID)
	}
	return AuditEntry{Actor: actor, Channel: channel, Action: AuditPairing, Subject: fmt.Sprintf("telegram user %d", p.UserID),
		TimelineScope: p.TimelineScope, Status: status,
		Detail: AuditDetail(map[string]any{"user_id": p.UserID, "chat_id": p.ChatID, "name": p.DisplayName})}
}

// AuditLogout records an owner ending a browser session.
const AuditLogout = "logout"

// RuleAudit is the audit entry of an owner's change to a rule ("added",
// "changed", "removed") on channel.
func RuleAudit(channel, status string, c Constraint) AuditEntry {
	d := map[string]any{"version": c.Version}
	if c.Text != "" {
		d["text"], d["hard"] = auditCut(c.Text, 500), c.Hard
	}
	return AuditEntry{Actor: "owner", Channel: channel, Action: AuditRuleChange, Subject: fmt.Sprintf("rule %d", c.ID),
		TimelineScope: c.TimelineScope, Status: status, Detail: AuditDetail(d)}
}

// RuleProposalAudit is the audit entry of the owner's decision on the
// agent's rule proposal ("approved", "rejected") on channel.
func RuleProposalAudit(channel string, p RuleProposal) AuditEntry {
	d := map[string]any{"text": auditCut(p.Text, 500), "hard": p.Hard}
	if p.ConstraintID != 0 {
		d["rule_id"] = p.ConstraintID
	}
	return AuditEntry{Actor: "owner", Channel: channel, Action: AuditRuleChange, Subject: fmt.Sprintf("rule proposal %d", p.ID),
		RunID: p.RunID, TimelineScope: p.TimelineScope, Status: p.Status, Detail: AuditDetail(d)}
}

// ScheduleAudit is the audit entry of an owner's change to a schedule
// ("created", "updated", "paused", "resumed", "deleted") on channel.
func ScheduleAudit(channel, status string, sc Schedule) AuditEntry {
	return AuditEntry{Actor: "owner", Channel: channel, Action: AuditScheduleChange, Subject: fmt.Sprintf("schedule %d", sc.ID),
		TimelineScope: sc.TimelineScope, Status: status,
		Detail: AuditDetail(map[string]any{"name": sc.Name, "task": auditCut(sc.Task, 500), "kind": sc.Kind, "spec": sc.Spec,
			"timezone": sc.Timezone, "notify": sc.Notify, "profile": sc.Profile, "state": sc.State, "version": sc.Version})}
}

// auditCut bounds a text kept in an audit row.
func auditCut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
