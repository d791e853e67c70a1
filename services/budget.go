package services

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// BudgetKind is the kind of run a daily budget bounds.
type BudgetKind string

// Kinds of run with a budget of their own (BUDGET_DAILY_TOKENS,
// BUDGET_DAILY_USD): the main
// conversation (tasks delegated inline included), sub-agents' child runs,
// and schedules' fires.
const (
	BudgetMain     BudgetKind = "main"
	BudgetSubagent BudgetKind = "subagent"
	BudgetSchedule BudgetKind = "schedule"
)

type budgetKindKey struct{}

// WithBudgetKind makes the model calls made under ctx outside a run's loop
// (the summary model's, when compaction summarises kind's history) count
// against kind's daily budget.
func WithBudgetKind(ctx context.Context, kind BudgetKind) context.Context {
	return context.WithValue(ctx, budgetKindKey{}, kind)
}

// BudgetKindOf is the kind WithBudgetKind gave ctx, BudgetMain when none.
func BudgetKindOf(ctx context.Context) BudgetKind {
	if k, ok := ctx.Value(budgetKindKey{}).(BudgetKind); ok && k != "" {
		return k
	}
	return BudgetMain
}

// ScopeBudgetKind is the kind whose budget pays for work on a context
// scope's history: a schedule's scope, a sub-agent's, else the main
// conversation.
func ScopeBudgetKind(scope string) BudgetKind {
	switch {
	case strings.HasPrefix(scope, "sched:"):
		return BudgetSchedule
	case strings.HasPrefix(scope, "run:"), strings.HasPrefix(scope, "sub:"):
		return BudgetSubagent
	}
	return BudgetMain
}

// BudgetKinds are the kinds, in the order reports list them.
var BudgetKinds = []BudgetKind{BudgetMain, BudgetSubagent, BudgetSchedule}

// CodeBudgetExceeded is the error code of a model call a daily budget
// refused (kind ERATELIMITED): the run ends, a schedule's fire ends
// skipped.
const CodeBudgetExceeded = "BUDGET_EXCEEDED"

// Money is an amount of US dollars in millionths (micro-dollars), the
// unit budget_days keeps money in. In JSON it is a number of dollars.
type Money int64

// MoneyFromUSD converts dollars to Money, rounded up to the micro-dollar.
func MoneyFromUSD(usd float64) Money { return Money(math.Ceil(usd*1e6 - 1e-6)) }

// USD is m in dollars.
func (m Money) USD() float64 { return float64(m) / 1e6 }

// String writes m as dollars: two decimals, up to four under a dollar and
// six under a cent ($0.0042, $0.000150), so a small spend never reads as
// $0.00.
func (m Money) String() string {
	usd := m.USD()
	switch {
	case m == 0:
		return "$0"
	case math.Abs(usd) >= 1:
		return fmt.Sprintf("$%.2f", usd)
	case math.Abs(usd) >= 0.01:
		return "$" + trimCents(fmt.Sprintf("%.4f", usd))
	}
	return "$" + trimCents(fmt.Sprintf("%.6f", usd))
}

// trimCents drops trailing zeros past the cents: 0.0800 → 0.08.
func trimCents(s string) string {
	for strings.HasSuffix(s, "0") && len(s)-strings.Index(s, ".") > 3 {
		s = s[:len(s)-1]
	}
	return s
}

// MarshalJSON writes dollars (1.25 for $1.25).
func (m Money) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(m.USD(), 'f', -1, 64)), nil
}

// UnmarshalJSON reads dollars.
func (m *Money) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("money: want a number of dollars, got %s", b)
	}
	*m = Money(math.Round(f * 1e6))
	return nil
}

// BudgetDay is one kind's spend on one day of the owner's zone
// (budget_days): tokens and money settled from model calls' usage (money
// only for models with a price, LLM_PRICES), tokens and money reserved by
// calls in flight, calls made and calls refused.
type BudgetDay struct {
	Day          string     `json:"day"` // YYYY-MM-DD in the owner's zone
	Kind         BudgetKind `json:"kind"`
	Spent        int64      `json:"spent_tokens"`
	Reserved     int64      `json:"reserved_tokens"`
	SpentCost    Money      `json:"spent_usd"`
	ReservedCost Money      `json:"reserved_usd"`
	Calls        int64      `json:"calls"`
	Refused      int64      `json:"refused"`
}

// BudgetAmount is an amount in both of a budget's units: tokens and money.
type BudgetAmount struct {
	Tokens int64
	Cost   Money
}

// BudgetStore keeps the daily spend per kind. ReserveBudget adds ask to
// the day's reservation in one statement only while spent + reserved +
// ask stays within limit in tokens and in money, so concurrent runs (on
// any instance) cannot pass it together; ok false (with the day's row)
// when it would. SettleBudget replaces a reservation by what the call
// used.
type BudgetStore interface {
	ReserveBudget(ctx context.Context, day string, kind BudgetKind, ask, limit BudgetAmount) (BudgetDay, bool, error)
	SettleBudget(ctx context.Context, day string, kind BudgetKind, reserved, used BudgetAmount) (BudgetDay, error)
	BudgetDays(ctx context.Context, from, to string) ([]BudgetDay, error)
}

// BudgetCall is what a model call asks of its kind's budget: the model
// (whose price, LLM_PRICES, turns tokens into money), the request's
// prompt tokens and the most it may answer.
type BudgetCall struct {
	Kind         BudgetKind
	Model        string
	PromptTokens int
	MaxOutput    int
}

// BudgetHold is one model call's reservation, settled after the call.
type BudgetHold struct {
	Day          string
	Kind         BudgetKind
	Model        string
	Reserved     int64
	ReservedCost Money
}

// Budgets reserve a model call's estimated tokens and cost against its
// kind's daily budgets before the call, and settle them to the usage
// after it. Reserve fails with CodeBudgetExceeded, naming the budget, the
// spend and when it resets, when the call would pass a budget.
type Budgets interface {
	Reserve(ctx context.Context, call BudgetCall) (BudgetHold, error)
	Settle(ctx context.Context, hold BudgetHold, used TokenUsage)
	// ReserveTx and SettleTx are Reserve and Settle in tx, the caller's
	// transaction, so they commit with its rows; SettleTx's after (the
	// call counted, the owner told past 80 %) runs once that transaction
	// committed.
	ReserveTx(ctx context.Context, tx Tx, call BudgetCall) (BudgetHold, error)
	SettleTx(ctx context.Context, tx Tx, hold BudgetHold, used TokenUsage) (after func(context.Context), err error)
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

// BudgetKindToday is one kind's line of the report (Limit 0: no token
// budget; LimitCost 0: no money budget).
type BudgetKindToday struct {
	Kind         BudgetKind `json:"kind"`
	Limit        int64      `json:"limit_tokens"`
	Spent        int64      `json:"spent_tokens"`
	Reserved     int64      `json:"reserved_tokens"`
	LimitCost    Money      `json:"limit_usd"`
	SpentCost    Money      `json:"spent_usd"`
	ReservedCost Money      `json:"reserved_usd"`
	Refused      int64      `json:"refused"`
}

// Text is the report as /budget writes it.
func (r BudgetReport) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Budgets today (%s, %s; reset at %s):\n", r.Today, r.Zone, r.ResetsAt.Format("15:04 MST"))
	for _, k := range r.Kinds {
		if k.Limit > 0 {
			fmt.Fprintf(&b, "- %s: %s of %s tokens (%d%%)", BudgetKindName(k.Kind), FormatTokens(k.Spent), FormatTokens(k.Limit), k.Spent*100/k.Limit)
		} else {
			fmt.Fprintf(&b, "- %s: %s tokens (no token budget)", BudgetKindName(k.Kind), FormatTokens(k.Spent))
		}
		if k.LimitCost > 0 {
			fmt.Fprintf(&b, "; %s of %s (%d%%)", k.SpentCost, k.LimitCost, int64(k.SpentCost)*100/int64(k.LimitCost))
		} else if k.SpentCost > 0 {
			fmt.Fprintf(&b, "; %s (no money budget)", k.SpentCost)
		}
		if k.Refused > 0 {
			fmt.Fprintf(&b, ", %s refused", Count(int(k.Refused), "call", "calls"))
		}
		b.WriteString("\n")
	}
	// A blank line: the heading is not part of the list above.
	b.WriteString("\nLast 7 days (tokens; money where the model has a price):\n")
	per := map[string]map[BudgetKind]int64{}
	cost := map[string]Money{}
	var order []string
	for _, d := range r.Days {
		if per[d.Day] == nil {
			per[d.Day] = map[BudgetKind]int64{}
			order = append(order, d.Day)
		}
		per[d.Day][d.Kind] += d.Spent
		cost[d.Day] += d.SpentCost
	}
	if len(order) == 0 {
		b.WriteString("- nothing spent\n")
	}
	for _, day := range order {
		fmt.Fprintf(&b, "- %s: main %s, sub-agents %s, schedules %s", day,
			FormatTokens(per[day][BudgetMain]), FormatTokens(per[day][BudgetSubagent]), FormatTokens(per[day][BudgetSchedule]))
		if cost[day] > 0 {
			fmt.Fprintf(&b, "; %s in all", cost[day])
		}
		b.WriteString("\n")
	}
	return strings.TrimSpace(b.String())
}

// StatusLine is the report in one line for /status: today's spend per
// kind, against its budgets where it has them.
func (r BudgetReport) StatusLine() string {
	var parts []string
	for _, k := range r.Kinds {
		part := BudgetKindName(k.Kind) + " " + FormatTokens(k.Spent) + " tokens"
		if k.Limit > 0 {
			part += " of " + FormatTokens(k.Limit)
		}
		if k.LimitCost > 0 {
			part += ", " + k.SpentCost.String() + " of " + k.LimitCost.String()
		} else if k.SpentCost > 0 {
			part += ", " + k.SpentCost.String()
		}
		parts = append(parts, part)
	}
	return "Spent today: " + strings.Join(parts, "; ") + " (/budget).\n"
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
