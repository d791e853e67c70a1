package services

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// BudgetKind is the kind of run a daily budget bounds.
type BudgetKind string

// Kinds of run with a budget of their own (BUDGET_DAILY_TOKENS): the main
// conversation (tasks delegated inline included), sub-agents' child runs,
// and schedules' fires.
const (
	BudgetMain     BudgetKind = "main"
	BudgetSubagent BudgetKind = "subagent"
	BudgetSchedule BudgetKind = "schedule"
)

// BudgetKinds are the kinds, in the order reports list them.
var BudgetKinds = []BudgetKind{BudgetMain, BudgetSubagent, BudgetSchedule}

// CodeBudgetExceeded is the error code of a model call a daily budget
// refused (kind ERATELIMITED): the run ends, a schedule's fire ends
// skipped.
const CodeBudgetExceeded = "BUDGET_EXCEEDED"

// BudgetDay is one kind's spend on one day of the owner's zone
// (budget_days): tokens settled from model calls' usage, tokens reserved
// by calls in flight, calls made and calls refused.
type BudgetDay struct {
	Day      string     `json:"day"` // YYYY-MM-DD in the owner's zone
	Kind     BudgetKind `json:"kind"`
	Spent    int64      `json:"spent_tokens"`
	Reserved int64      `json:"reserved_tokens"`
	Calls    int64      `json:"calls"`
	Refused  int64      `json:"refused"`
}

// BudgetStore keeps the daily spend per kind. ReserveBudget adds tokens to
// the day's reservation in one statement only while spent + reserved +
// tokens stays within limit, so concurrent runs (on any instance) cannot
// pass it together; ok false (with the day's row) when it would.
// SettleBudget replaces a reservation by what the call used.
type BudgetStore interface {
	ReserveBudget(ctx context.Context, day string, kind BudgetKind, tokens, limit int64) (BudgetDay, bool, error)
	SettleBudget(ctx context.Context, day string, kind BudgetKind, reserved, used int64) (BudgetDay, error)
	BudgetDays(ctx context.Context, from, to string) ([]BudgetDay, error)
}

// BudgetHold is one model call's reservation, settled after the call.
type BudgetHold struct {
	Day      string
	Kind     BudgetKind
	Reserved int64
}

// Budgets reserve a model call's estimated tokens against its kind's
// daily budget before the call, and settle them to the usage after it.
// Reserve fails with CodeBudgetExceeded, naming the budget, the spend and
// when it resets, when the call would pass the budget.
type Budgets interface {
	Reserve(ctx context.Context, kind BudgetKind, tokens int) (BudgetHold, error)
	Settle(ctx context.Context, hold BudgetHold, used int)
	Report(ctx context.Context) (BudgetReport, error)
}

// BudgetReport is what /budget and GET /api/budget show: each kind's
// budget and spend today, and the spend of the last 7 days.
type BudgetReport struct {
	Today    string            `json:"today"`
	ResetsAt time.Time         `json:"resets_at"`
	Zone     string            `json:"zone"`
	Kinds    []BudgetKindToday `json:"kinds"`
	Days     []BudgetDay       `json:"days"`
}

// BudgetKindToday is one kind's line of the report (Limit 0: no budget).
type BudgetKindToday struct {
	Kind     BudgetKind `json:"kind"`
	Limit    int64      `json:"limit_tokens"`
	Spent    int64      `json:"spent_tokens"`
	Reserved int64      `json:"reserved_tokens"`
	Refused  int64      `json:"refused"`
}

// Text is the report as /budget writes it.
func (r BudgetReport) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Budgets today (%s, %s; reset at %s):\n", r.Today, r.Zone, r.ResetsAt.Format("15:04 MST"))
	for _, k := range r.Kinds {
		if k.Limit > 0 {
			fmt.Fprintf(&b, "- %s: %s of %s tokens (%d%%)", BudgetKindName(k.Kind), FormatTokens(k.Spent), FormatTokens(k.Limit), k.Spent*100/k.Limit)
		} else {
			fmt.Fprintf(&b, "- %s: %s tokens (no budget)", BudgetKindName(k.Kind), FormatTokens(k.Spent))
		}
		if k.Refused > 0 {
			fmt.Fprintf(&b, ", %d call(s) refused", k.Refused)
		}
		b.WriteString("\n")
	}
	b.WriteString("Last 7 days (tokens):\n")
	per := map[string]map[BudgetKind]int64{}
	var order []string
	for _, d := range r.Days {
		if per[d.Day] == nil {
			per[d.Day] = map[BudgetKind]int64{}
			order = append(order, d.Day)
		}
		per[d.Day][d.Kind] += d.Spent
	}
	if len(order) == 0 {
		b.WriteString("- nothing spent\n")
	}
	for _, day := range order {
		fmt.Fprintf(&b, "- %s: main %s, sub-agents %s, schedules %s\n", day,
			FormatTokens(per[day][BudgetMain]), FormatTokens(per[day][BudgetSubagent]), FormatTokens(per[day][BudgetSchedule]))
	}
	return strings.TrimSpace(b.String())
}

// BudgetKindName is the kind in the owner's words.
func BudgetKindName(k BudgetKind) string {
	switch k {
	case BudgetMain:
		return "the main conversation"
	case BudgetSubagent:
		return "sub-agents"
	case BudgetSchedule:
		return "schedules"
	}
	return string(k)
}

// FormatTokens writes n with thousands separators (12,345).
func FormatTokens(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
