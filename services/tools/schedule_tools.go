package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

type scheduleArgs struct {
	Task     string     `json:"task,omitempty" jsonschema:"What to do at each fire, self-contained (the run sees only this and its own earlier fires), e.g. 'Tell me whether tickets are available'. Optional with watch."`
	Name     string     `json:"name,omitempty" jsonschema:"A short name shown with each notification. Default: the first words of the task."`
	At       string     `json:"at,omitempty" jsonschema:"One-shot: when to fire: 'in 20m' / '+2h' from now, RFC 3339 (2026-05-01T09:00:00+02:00), or a local time 2026-05-01T09:00 in the schedule's time zone."`
	Every    string     `json:"every,omitempty" jsonschema:"Repeat at a fixed interval: 30m, 2h, 1h30m, 1d."`
	Cron     string     `json:"cron,omitempty" jsonschema:"Repeat on a 5-field cron expression in the schedule's time zone: '0 9 * * 1-5' is 9:00 on weekdays."`
	Notify   string     `json:"notify,omitempty" jsonschema:"When the owner hears about a fire: always (reminders; default for at), on_change (monitors: only when the finding differs from the last one; default otherwise), on_finding (whenever something is found)."`
	Timezone string     `json:"timezone,omitempty" jsonschema:"IANA time zone of at and cron, e.g. Europe/Berlin. Default: the owner's."`
	Profile  string     `json:"profile,omitempty" jsonschema:"A sub-agent profile whose tools and model the fires use. Default: the main agent's tools."`
	Watch    *watchArgs `json:"watch,omitempty" jsonschema:"To watch or monitor a page: read first without you; no change, no cost."`
}

type watchArgs struct {
	URL      string   `json:"url" jsonschema:"Page URL."`
	Selector string   `json:"selector,omitempty" jsonschema:"CSS selector of the part that matters."`
	Pattern  string   `json:"pattern,omitempty" jsonschema:"Regexp of the text that matters."`
	Ignore   []string `json:"ignore,omitempty" jsonschema:"Regexps to ignore: timestamps, counters."`
}

func (w *watchArgs) request() *services.Watch {
	if w == nil {
		return nil
	}
	return &services.Watch{URL: w.URL, Selector: w.Selector, Pattern: w.Pattern, Ignore: w.Ignore}
}

type updateScheduleArgs struct {
	ID       int64            `json:"id" jsonschema:"The schedule's id (list_schedules shows them)."`
	Task     string           `json:"task,omitempty"`
	Name     string           `json:"name,omitempty"`
	At       string           `json:"at,omitempty"`
	Every    string           `json:"every,omitempty"`
	Cron     string           `json:"cron,omitempty"`
	Notify   string           `json:"notify,omitempty" jsonschema:"always, on_change or on_finding."`
	Timezone string           `json:"timezone,omitempty"`
	State    string           `json:"state,omitempty" jsonschema:"paused or active."`
	Watch    *updateWatchArgs `json:"watch,omitempty" jsonschema:"As in schedule; url \"\" removes it."`
}

// updateWatchArgs is update_schedule's watch: schedule's fields, described
// once in schedule's schema (the prompt carries both; small windows count).
type updateWatchArgs struct {
	URL      string   `json:"url"`
	Selector string   `json:"selector,omitempty"`
	Pattern  string   `json:"pattern,omitempty"`
	Ignore   []string `json:"ignore,omitempty"`
}

func (w *updateWatchArgs) request() *services.Watch {
	if w == nil {
		return nil
	}
	return (&watchArgs{URL: w.URL, Selector: w.Selector, Pattern: w.Pattern, Ignore: w.Ignore}).request()
}

type scheduleIDArgs struct {
	ID int64 `json:"id" jsonschema:"The schedule's id (list_schedules shows them)."`
}

type noArgs struct{}

// registerScheduleTools adds schedule, update_schedule, cancel_schedule and
// list_schedules: "remind me tomorrow at 9" and "check this page every 30
// minutes and tell me when tickets appear" in plain words.
func (s *Service) registerScheduleTools(reg *tools.Registry) error {
	for _, t := range []tools.Tool{
		tools.Func("schedule", services.EffectPersist, "Schedule a task to run later on its own, once (at) or repeatedly (every, cron): reminders and monitors. "+
			"Each fire runs the task with your tools in a workspace of its own and tells the owner only what the notify policy lets through. "+
			"Give exactly one of at, every, cron. Times are in the owner's time zone unless timezone says otherwise. "+
			"To watch or monitor a page (tell me when it changes), give watch.", s.toolSchedule),
		tools.Func("update_schedule", services.EffectPersist, "Change a schedule; give only what changes, as in schedule (a new at, every or cron replaces its time); state pauses or resumes it.", s.toolUpdateSchedule),
		tools.Func("cancel_schedule", services.EffectDestructive, "Delete a schedule: it never fires again.", s.toolCancelSchedule),
		tools.Func("list_schedules", services.EffectRead, "List the owner's schedules with their state, next fire and last result.", s.toolListSchedules),
	} {
		if err := reg.Register(t.WithHistory(tools.HistoryRule{MaxChars: 600})); err != nil {
			return err
		}
	}
	return nil
}

func optional(v string) *string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	return &v
}

func (s *Service) toolSchedule(ctx context.Context, call tools.Call, a scheduleArgs) (tools.Result, error) {
	task := &a.Task
	if a.Task == "" && a.Watch != nil {
		task = nil // the watch's default task: tell what changed
	}
	sc, err := s.opts.Schedules.Create(ctx, call.TimelineScope, services.ScheduleRequest{
		Task: task, Name: optional(a.Name), At: optional(a.At), Every: optional(a.Every), Cron: optional(a.Cron),
		Notify: optional(a.Notify), Timezone: optional(a.Timezone), Profile: optional(a.Profile), Watch: a.Watch.request(),
	})
	if err != nil {
		return tools.Result{}, err
	}
	return tools.JSONResult(s.scheduleView(sc))
}

func (s *Service) toolUpdateSchedule(ctx context.Context, call tools.Call, a updateScheduleArgs) (tools.Result, error) {
	sc, err := s.opts.Schedules.Update(ctx, call.TimelineScope, a.ID, 0, services.ScheduleRequest{
		Task: optional(a.Task), Name: optional(a.Name), At: optional(a.At), Every: optional(a.Every), Cron: optional(a.Cron),
		Notify: optional(a.Notify), Timezone: optional(a.Timezone), State: optional(a.State), Watch: a.Watch.request(),
	})
	if err != nil {
		return tools.Result{}, err
	}
	return tools.JSONResult(s.scheduleView(sc))
}

func (s *Service) toolCancelSchedule(ctx context.Context, call tools.Call, a scheduleIDArgs) (tools.Result, error) {
	sc, err := s.opts.Schedules.Delete(ctx, call.TimelineScope, a.ID)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.JSONResult(map[string]any{"id": sc.ID, "name": sc.Name, "state": sc.State})
}

func (s *Service) toolListSchedules(ctx context.Context, call tools.Call, _ noArgs) (tools.Result, error) {
	list, err := s.opts.Schedules.List(ctx, call.TimelineScope, 1)
	if err != nil {
		return tools.Result{}, err
	}
	out := make([]map[string]any, 0, len(list))
	for _, w := range list {
		v := s.scheduleView(w.Schedule)
		if len(w.Fires) > 0 {
			receipt, why := w.Fires[0].Receipt()
			v["last_fire"] = map[string]any{"receipt": receipt, "why": why, "tokens": w.Fires[0].Tokens, "notified": w.Fires[0].Notified, "at": s.localTime(w.Schedule, w.Fires[0].FireAt)}
		}
		out = append(out, v)
	}
	return tools.JSONResult(map[string]any{"schedules": out})
}

// scheduleView is a schedule as the model reads it: times in its zone.
func (s *Service) scheduleView(sc services.Schedule) map[string]any {
	v := map[string]any{"id": sc.ID, "name": sc.Name, "task": sc.Task, string(sc.Kind): sc.Spec, "notify": sc.Notify,
		"timezone": sc.Timezone, "state": sc.State}
	if sc.NextFireAt != nil {
		v["next_fire"] = s.localTime(sc, *sc.NextFireAt)
	}
	if sc.StateReason != "" {
		v["state_reason"] = sc.StateReason
	}
	if sc.Watch != nil {
		v["watch"] = sc.Watch
	}
	return v
}

func (s *Service) localTime(sc services.Schedule, t time.Time) string {
	return t.In(s.opts.Fires.Location(sc)).Format("Mon 2006-01-02 15:04 MST")
}

// cmdSchedules answers /schedules (the list) and /schedules pause|resume|
// delete ID.
func (s *Service) cmdSchedules(ctx context.Context, msg services.Message, args string) (string, error) {
	if s.opts.Schedules == nil {
		return "Schedules are not available on this server.", nil
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	if verb == "" {
		return s.listSchedulesText(ctx, msg.TimelineScope)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(rest), "#"), 10, 64)
	if err != nil || id <= 0 {
		return "Usage: /schedules, or /schedules pause|resume|delete ID (ID from /schedules).", nil
	}
	var sc services.Schedule
	switch verb {
	case "pause", "resume":
		state := string(services.SchedulePaused)
		if verb == "resume" {
			state = string(services.ScheduleActive)
		}
		sc, err = s.opts.Schedules.Update(ctx, msg.TimelineScope, id, 0, services.ScheduleRequest{State: &state})
	case "delete":
		sc, err = s.opts.Schedules.Delete(ctx, msg.TimelineScope, id)
	default:
		return fmt.Sprintf("Unknown /schedules %s. Usage: /schedules, or /schedules pause|resume|delete ID.", verb), nil
	}
	if err != nil {
		return "", err
	}
	s.auditCommand(ctx, msg, services.ScheduleAudit("", verb+"d", sc))
	switch sc.State {
	case services.ScheduleDeleted:
		return fmt.Sprintf("Deleted schedule #%d %q.", sc.ID, sc.Name), nil
	case services.SchedulePaused:
		return fmt.Sprintf("Paused schedule #%d %q.", sc.ID, sc.Name), nil
	}
	next := ""
	if sc.NextFireAt != nil {
		next = "; next fire " + s.localTime(sc, *sc.NextFireAt)
	}
	return fmt.Sprintf("Resumed schedule #%d %q%s.", sc.ID, sc.Name, next), nil
}

// receiptsShown is how many of each schedule's last fires /schedules shows.
const receiptsShown = 5

// receiptLine is one fire's receipt as /schedules shows it: when, how it
// ended (and why), the model calls and tokens it spent, whether it told
// the owner.
func (s *Service) receiptLine(sc services.Schedule, f services.ScheduleFire) string {
	receipt, why := f.Receipt()
	line := s.localTime(sc, f.FireAt) + " " + receipt
	if f.Missed > 0 {
		line += fmt.Sprintf(" (for %d missed)", f.Missed)
	}
	if why != "" {
		line += ": " + truncateText(why, 200)
	}
	line += fmt.Sprintf(" — %d model calls, %d tokens", f.ModelCalls, f.Tokens)
	if f.Notified {
		line += ", told you"
	}
	return line
}

func (s *Service) listSchedulesText(ctx context.Context, timeline string) (string, error) {
	list, err := s.opts.Schedules.List(ctx, timeline, receiptsShown)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "No schedules. Ask the agent, e.g. \"remind me tomorrow at 9 to call Anna\" or \"check example.org/tickets every 30 minutes and tell me when tickets appear\".", nil
	}
	var b strings.Builder
	b.WriteString("Schedules:")
	for _, w := range list {
		sc := w.Schedule
		fmt.Fprintf(&b, "\n#%d %s — %s %s, notify %s, %s", sc.ID, sc.Name, sc.Kind, sc.Spec, sc.Notify, sc.State)
		if sc.Watch != nil {
			fmt.Fprintf(&b, ", watching %s", sc.Watch.Target())
		}
		if sc.NextFireAt != nil {
			fmt.Fprintf(&b, ", next %s", s.localTime(sc, *sc.NextFireAt))
		}
		if sc.StateReason != "" && sc.State == services.SchedulePaused {
			fmt.Fprintf(&b, " — %s", sc.StateReason)
		}
		for _, f := range w.Fires {
			b.WriteString("\n   " + s.receiptLine(sc, f))
		}
	}
	b.WriteString("\n/schedules pause|resume|delete ID changes one.")
	return b.String(), nil
}
