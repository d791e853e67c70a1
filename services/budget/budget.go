// Package budget enforces the owner's daily budgets per kind of run, in
// tokens (BUDGET_DAILY_TOKENS) and in US dollars (BUDGET_DAILY_USD, priced
// by LLM_PRICES): before each model call the run reserves its estimate in
// PostgreSQL (services.BudgetStore, atomic across instances), after it the
// reservation is settled to the usage; at 80 % of a budget the owner is
// told once a day on every channel.
package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
)

// WarnPercent is the share of a budget at which the owner is told.
const WarnPercent = 80

// Limits are the daily token budgets per kind; a kind without one is not
// bounded (its spend is still counted and shown).
type Limits map[services.BudgetKind]int64

// ParseLimits reads BUDGET_DAILY_TOKENS: a JSON object of kinds and
// positive token counts, e.g. {"main":200000,"subagent":100000,"schedule":50000}.
func ParseLimits(s string) (Limits, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var raw map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf(`want a JSON object such as {"main":200000,"schedule":50000}: %v`, err)
	}
	out := Limits{}
	for k, v := range raw {
		kind := services.BudgetKind(k)
		if !knownKind(kind) {
			return nil, fmt.Errorf("unknown kind %q (want main, subagent or schedule)", k)
		}
		n, err := v.Int64()
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: want a positive whole number of tokens, got %s", k, v)
		}
		out[kind] = n
	}
	return out, nil
}

func knownKind(k services.BudgetKind) bool {
	for _, x := range services.BudgetKinds {
		if x == k {
			return true
		}
	}
	return false
}

// Options configure a Service.
type Options struct {
	Store  services.BudgetStore
	Limits Limits
	// Money are the daily budgets in US dollars; a call's cost is its
	// model's price (Prices) times its tokens. A model without a price
	// costs nothing it could be refused for, except against a money budget
	// (refused: it cannot be counted; CheckPriced refuses that at start).
	Money  MoneyLimits
	Prices Prices
	// Location is the owner's zone, whose midnight starts a budget's day
	// (default: the server's).
	Location *time.Location
	// Chat posts the 80 % notice to Timeline (default services.DefaultTimeline),
	// delivered to every channel; nil: no notice.
	Chat     services.ChatService
	Timeline string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Observe, when set, hears each settled call's tokens and cost and
	// each refusal (metrics).
	Observe func(kind services.BudgetKind, tokens int, cost services.Money, refused bool)
	Logger  *slog.Logger
}

// Service is services.Budgets.
type Service struct {
	opts Options
	log  *slog.Logger
}

// New returns the budgets of opts.
func New(opts Options) *Service {
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeline == "" {
		opts.Timeline = services.DefaultTimeline
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: log}
}

// day is today's date in the owner's zone and the time it ends.
func (s *Service) day() (string, time.Time) {
	now := s.opts.Now().In(s.opts.Location)
	y, m, d := now.Date()
	return now.Format("2006-01-02"), time.Date(y, m, d+1, 0, 0, 0, 0, s.opts.Location)
}

func (s *Service) limit(kind services.BudgetKind) services.BudgetAmount {
	l := services.BudgetAmount{Tokens: math.MaxInt64 / 4, Cost: math.MaxInt64 / 4}
	if n, ok := s.opts.Limits[kind]; ok {
		l.Tokens = n
	}
	if m, ok := s.opts.Money[kind]; ok {
		l.Cost = m
	}
	return l
}

// Reserve reserves a call's estimate, its prompt tokens and largest
// answer, in tokens and (for a priced model) in money. A call that would
// pass either of the kind's budgets is refused with CodeBudgetExceeded.
func (s *Service) Reserve(ctx context.Context, call services.BudgetCall) (services.BudgetHold, error) {
	return s.reserveIn(ctx, s.opts.Store, call)
}

// ReserveTx is Reserve in tx, the caller's transaction (the run's prompt
// step commits with its first call's reservation). A refusal is counted
// in tx too; the transaction should commit it.
func (s *Service) ReserveTx(ctx context.Context, tx services.Tx, call services.BudgetCall) (services.BudgetHold, error) {
	return s.reserveIn(ctx, tx, call)
}

// reserveIn is Reserve in st: the Store, or a Tx.
func (s *Service) reserveIn(ctx context.Context, st services.BudgetStore, call services.BudgetCall) (services.BudgetHold, error) {
	day, resets := s.day()
	kind := call.Kind
	hold := services.BudgetHold{Day: day, Kind: kind, Model: call.Model, Reserved: int64(max(call.PromptTokens, 0) + max(call.MaxOutput, 0))}
	price, priced := s.opts.Prices.Lookup(call.Model)
	if priced {
		hold.ReservedCost = price.Estimate(call.PromptTokens, call.MaxOutput)
	}
	limit := s.limit(kind)
	moneyLimit, inMoney := s.opts.Money[kind]
	if inMoney && !priced {
		s.refused(kind)
		return services.BudgetHold{}, &services.Error{Kind: services.ERATELIMITED, Code: services.CodeBudgetExceeded,
			Message: fmt.Sprintf("the daily budget for %s is in money (%s) and model %s has no price in LLM_PRICES, so its calls cannot be counted", services.BudgetKindName(kind), moneyLimit, call.Model)}
	}
	d, ok, err := st.ReserveBudget(ctx, day, kind, services.BudgetAmount{Tokens: hold.Reserved, Cost: hold.ReservedCost}, limit)
	if err != nil {
		return services.BudgetHold{}, err
	}
	if ok {
		return hold, nil
	}
	s.refused(kind)
	s.log.Warn("model call refused by the daily budget", "kind", kind, "day", day, "spent", d.Spent, "reserved", d.Reserved,
		"asked", hold.Reserved, "spent_usd", d.SpentCost.USD(), "reserved_usd", d.ReservedCost.USD(), "asked_usd", hold.ReservedCost.USD())
	var msg string
	if inMoney && d.SpentCost+d.ReservedCost+hold.ReservedCost > moneyLimit {
		msg = fmt.Sprintf("the daily budget for %s (%s) would be passed: %s spent today (%s more held by calls in flight), this call to %s may cost up to %s",
			services.BudgetKindName(kind), moneyLimit, d.SpentCost, d.ReservedCost, call.Model, hold.ReservedCost)
	} else {
		msg = fmt.Sprintf("the daily budget for %s (%s tokens) would be passed: %s tokens spent today (%s more held by calls in flight), this call needs about %s",
			services.BudgetKindName(kind), services.FormatTokens(limit.Tokens), services.FormatTokens(d.Spent), services.FormatTokens(d.Reserved), services.FormatTokens(hold.Reserved))
	}
	return services.BudgetHold{}, &services.Error{Kind: services.ERATELIMITED, Code: services.CodeBudgetExceeded,
		Message: msg + "; it resets at " + resets.Format("2006-01-02 15:04 MST")}
}

func (s *Service) refused(kind services.BudgetKind) {
	if s.opts.Observe != nil {
		s.opts.Observe(kind, 0, 0, true)
	}
}

// Settle replaces hold by what the call used (its cost at the model's
// price); past WarnPercent of a budget the owner is told, once per day,
// kind and unit.
func (s *Service) Settle(ctx context.Context, hold services.BudgetHold, used services.TokenUsage) {
	after, err := s.settleIn(context.WithoutCancel(ctx), s.opts.Store, hold, used)
	if err != nil {
		s.log.Error("settle budget", "kind", hold.Kind, "day", hold.Day, "err", err)
		return
	}
	after(ctx)
}

// SettleTx is Settle in tx, the caller's transaction (a main run's answer
// commits with its call's settlement); after, called once that
// transaction committed, counts the call and tells the owner past
// WarnPercent.
func (s *Service) SettleTx(ctx context.Context, tx services.Tx, hold services.BudgetHold, used services.TokenUsage) (after func(context.Context), err error) {
	return s.settleIn(ctx, tx, hold, used)
}

// settleIn is Settle in st (the Store, or a Tx), its after work returned.
func (s *Service) settleIn(ctx context.Context, st services.BudgetStore, hold services.BudgetHold, used services.TokenUsage) (after func(context.Context), err error) {
	if hold.Day == "" {
		return func(context.Context) {}, nil
	}
	amount := services.BudgetAmount{Tokens: int64(max(used.PromptTokens, 0) + max(used.CompletionTokens, 0))}
	if price, ok := s.opts.Prices.Lookup(hold.Model); ok {
		amount.Cost = price.Cost(used)
	}
	d, err := st.SettleBudget(ctx, hold.Day, hold.Kind, services.BudgetAmount{Tokens: hold.Reserved, Cost: hold.ReservedCost}, amount)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { s.settled(context.WithoutCancel(ctx), hold, amount, d) }, nil
}

// settled counts a settled call and, past WarnPercent of a budget, tells
// the owner.
func (s *Service) settled(ctx context.Context, hold services.BudgetHold, amount services.BudgetAmount, d services.BudgetDay) {
	if s.opts.Observe != nil {
		s.opts.Observe(hold.Kind, int(amount.Tokens), amount.Cost, false)
	}
	if s.opts.Chat == nil {
		return
	}
	kindName := services.BudgetKindName(hold.Kind)
	if limit, ok := s.opts.Limits[hold.Kind]; ok && d.Spent*100 >= limit*WarnPercent {
		s.warn(ctx, fmt.Sprintf("budget:%s:%s:warn", hold.Day, hold.Kind),
			fmt.Sprintf("Budget: %s tokens of today's %s-token budget for %s are spent (%d%%). Past it, model calls of %s are refused until the budget resets at midnight (%s). /budget shows the spend.",
				services.FormatTokens(d.Spent), services.FormatTokens(limit), kindName, d.Spent*100/limit, kindName, s.opts.Location))
	}
	if limit, ok := s.opts.Money[hold.Kind]; ok && int64(d.SpentCost)*100 >= int64(limit)*WarnPercent {
		s.warn(ctx, fmt.Sprintf("budget:%s:%s:warn-usd", hold.Day, hold.Kind),
			fmt.Sprintf("Budget: %s of today's %s budget for %s is spent (%d%%). Past it, model calls of %s are refused until the budget resets at midnight (%s). /budget shows the spend.",
				d.SpentCost, limit, kindName, int64(d.SpentCost)*100/int64(limit), kindName, s.opts.Location))
	}
}

// warn posts a budget notice to the owner's timeline and channels; the
// dedupe key makes it one notice per day, kind and unit, whichever call
// or instance gets here first.
func (s *Service) warn(ctx context.Context, key, text string) {
	_, _, err := s.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: s.opts.Timeline, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: text, DedupeKey: key, NotifyOwner: true,
		Metadata: services.MessageMeta{Notice: "budget_warning"}.Encode(),
	})
	if err != nil {
		s.log.Error("post budget notice", "key", key, "err", err)
	}
}

// Report is each kind's budget and spend today, and the last 7 days.
func (s *Service) Report(ctx context.Context) (services.BudgetReport, error) {
	day, resets := s.day()
	from := resets.AddDate(0, 0, -7).Format("2006-01-02")
	days, err := s.opts.Store.BudgetDays(ctx, from, day)
	if err != nil {
		return services.BudgetReport{}, err
	}
	r := services.BudgetReport{Today: day, ResetsAt: resets, Zone: s.opts.Location.String(), Days: days}
	for _, k := range services.BudgetKinds {
		line := services.BudgetKindToday{Kind: k, Limit: s.opts.Limits[k], LimitCost: s.opts.Money[k]}
		for _, d := range days {
			if d.Day == day && d.Kind == k {
				line.Spent, line.Reserved, line.Refused = d.Spent, d.Reserved, d.Refused
				line.SpentCost, line.ReservedCost = d.SpentCost, d.ReservedCost
			}
		}
		r.Kinds = append(r.Kinds, line)
	}
	return r, nil
}
