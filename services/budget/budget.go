// Package budget enforces the owner's daily token budgets per kind of run
// (BUDGET_DAILY_TOKENS): before each model call the run reserves its
// estimate in PostgreSQL (services.BudgetStore, atomic across instances),
// after it the reservation is settled to the usage; at 80 % of a budget
// the owner is told once a day on every channel.
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
	// Location is the owner's zone, whose midnight starts a budget's day
	// (default: the server's).
	Location *time.Location
	// Chat posts the 80 % notice to Timeline (default services.DefaultTimeline),
	// delivered to every channel; nil: no notice.
	Chat     services.ChatService
	Timeline string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Observe, when set, hears each settled call's tokens and each refusal
	// (metrics).
	Observe func(kind services.BudgetKind, tokens int, refused bool)
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

func (s *Service) limit(kind services.BudgetKind) int64 {
	if n, ok := s.opts.Limits[kind]; ok {
		return n
	}
	return math.MaxInt64 / 4
}

// Reserve reserves tokens for one model call of kind. A call that would
// pass the kind's budget is refused with CodeBudgetExceeded.
func (s *Service) Reserve(ctx context.Context, kind services.BudgetKind, tokens int) (services.BudgetHold, error) {
	day, resets := s.day()
	hold := services.BudgetHold{Day: day, Kind: kind, Reserved: int64(max(tokens, 0))}
	d, ok, err := s.opts.Store.ReserveBudget(ctx, day, kind, hold.Reserved, s.limit(kind))
	if err != nil {
		return services.BudgetHold{}, err
	}
	if ok {
		return hold, nil
	}
	if s.opts.Observe != nil {
		s.opts.Observe(kind, 0, true)
	}
	s.log.Warn("model call refused by the daily budget", "kind", kind, "day", day, "spent", d.Spent, "reserved", d.Reserved, "asked", tokens)
	return services.BudgetHold{}, &services.Error{Kind: services.ERATELIMITED, Code: services.CodeBudgetExceeded,
		Message: fmt.Sprintf("the daily budget for %s (%s tokens) would be passed: %s tokens spent today (%s more held by calls in flight), this call needs about %s; it resets at %s",
			services.BudgetKindName(kind), services.FormatTokens(s.limit(kind)), services.FormatTokens(d.Spent), services.FormatTokens(d.Reserved), services.FormatTokens(int64(tokens)), resets.Format("2006-01-02 15:04 MST"))}
}

// Settle replaces hold by the tokens the call used; past WarnPercent of
// the budget the owner is told, once per day and kind.
func (s *Service) Settle(ctx context.Context, hold services.BudgetHold, used int) {
	if hold.Day == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	d, err := s.opts.Store.SettleBudget(ctx, hold.Day, hold.Kind, hold.Reserved, int64(used))
	if err != nil {
		s.log.Error("settle budget", "kind", hold.Kind, "day", hold.Day, "err", err)
		return
	}
	if s.opts.Observe != nil {
		s.opts.Observe(hold.Kind, used, false)
	}
	limit, bounded := s.opts.Limits[hold.Kind]
	if !bounded || s.opts.Chat == nil || d.Spent*100 < limit*WarnPercent {
		return
	}
	// The dedupe key makes it one notice per day and kind, whichever
	// call or instance gets here first.
	_, _, err = s.opts.Chat.Post(ctx, services.PostParams{
		TimelineScope: s.opts.Timeline, Source: services.SourceSystem, Role: services.RoleAssistant,
		Content: fmt.Sprintf("Budget: %s tokens of today's %s-token budget for %s are spent (%d%%). Past it, model calls of %s are refused until the budget resets at midnight (%s). /budget shows the spend.",
			services.FormatTokens(d.Spent), services.FormatTokens(limit), services.BudgetKindName(hold.Kind), d.Spent*100/limit, services.BudgetKindName(hold.Kind), s.opts.Location),
		DedupeKey: fmt.Sprintf("budget:%s:%s:warn", hold.Day, hold.Kind), NotifyOwner: true,
		Metadata: services.MessageMeta{Notice: "budget_warning"}.Encode(),
	})
	if err != nil {
		s.log.Error("post budget notice", "kind", hold.Kind, "err", err)
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
		line := services.BudgetKindToday{Kind: k, Limit: s.opts.Limits[k]}
		for _, d := range days {
			if d.Day == day && d.Kind == k {
				line.Spent, line.Reserved, line.Refused = d.Spent, d.Reserved, d.Refused
			}
		}
		r.Kinds = append(r.Kinds, line)
	}
	return r, nil
}
