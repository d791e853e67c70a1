package tools

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
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

// ScheduleTools are schedule, update_schedule, cancel_schedule and
// list_schedules: "remind me tomorrow at 9" and "check this page every 30
// minutes and tell me when tickets appear" in plain words. Schedules keeps
// them; Zones says in which time zone the model reads a schedule's times.
type ScheduleTools struct {
	Schedules services.Schedules
	Zones     ScheduleZones
}

// ScheduleZones gives a schedule's time zone (services.ScheduleFires).
type ScheduleZones interface {
	Location(sc services.Schedule) *time.Location
}

// Register adds the four schedule tools.
func (s ScheduleTools) Register(reg *Registry) error {
	if s.Schedules == nil || s.Zones == nil {
		return errors.New("schedule tools: Schedules and Zones are required")
	}
	for _, t := range []Tool{
		Func("schedule", services.EffectPersist, "Schedule a task to run later on its own, once (at) or repeatedly (every, cron): reminders and monitors. "+
			"Each fire runs the task with your tools in a workspace of its own and tells the owner only what the notify policy lets through. "+
			"Give exactly one of at, every, cron. Times are in the owner's time zone unless timezone says otherwise. "+
			"To watch or monitor a page (tell me when it changes), give watch.", s.toolSchedule),
		Func("update_schedule", services.EffectPersist, "Change a schedule; give only what changes, as in schedule (a new at, every or cron replaces its time); state pauses or resumes it.", s.toolUpdateSchedule),
		Func("cancel_schedule", services.EffectDestructive, "Delete a schedule: it never fires again.", s.toolCancelSchedule),
		Func("list_schedules", services.EffectRead, "List the owner's schedules with their state, next fire and last result.", s.toolListSchedules),
	} {
		if err := reg.Register(t.WithHistory(HistoryRule{MaxChars: 600})); err != nil {
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

func (s ScheduleTools) toolSchedule(ctx context.Context, call Call, a scheduleArgs) (Result, error) {
	task := &a.Task
	if a.Task == "" && a.Watch != nil {
		task = nil // the watch's default task: tell what changed
	}
	sc, err := s.Schedules.Create(ctx, call.TimelineScope, services.ScheduleRequest{
		Task: task, Name: optional(a.Name), At: optional(a.At), Every: optional(a.Every), Cron: optional(a.Cron),
		Notify: optional(a.Notify), Timezone: optional(a.Timezone), Profile: optional(a.Profile), Watch: a.Watch.request(),
	})
	if err != nil {
		return Result{}, err
	}
	return JSONResult(s.scheduleView(sc))
}

func (s ScheduleTools) toolUpdateSchedule(ctx context.Context, call Call, a updateScheduleArgs) (Result, error) {
	sc, err := s.Schedules.Update(ctx, call.TimelineScope, a.ID, 0, services.ScheduleRequest{
		Task: optional(a.Task), Name: optional(a.Name), At: optional(a.At), Every: optional(a.Every), Cron: optional(a.Cron),
		Notify: optional(a.Notify), Timezone: optional(a.Timezone), State: optional(a.State), Watch: a.Watch.request(),
	})
	if err != nil {
		return Result{}, err
	}
	return JSONResult(s.scheduleView(sc))
}

func (s ScheduleTools) toolCancelSchedule(ctx context.Context, call Call, a scheduleIDArgs) (Result, error) {
	sc, err := s.Schedules.Delete(ctx, call.TimelineScope, a.ID)
	if err != nil {
		return Result{}, err
	}
	return JSONResult(map[string]any{"id": sc.ID, "name": sc.Name, "state": sc.State})
}

func (s ScheduleTools) toolListSchedules(ctx context.Context, call Call, _ noArgs) (Result, error) {
	list, err := s.Schedules.List(ctx, call.TimelineScope, 1)
	if err != nil {
		return Result{}, err
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
	return JSONResult(map[string]any{"schedules": out})
}

// scheduleView is a schedule as the model reads it: times in its zone.
func (s ScheduleTools) scheduleView(sc services.Schedule) map[string]any {
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

func (s ScheduleTools) localTime(sc services.Schedule, t time.Time) string {
	return LocalTime(s.Zones, sc, t)
}

// LocalTime is t as the owner reads a schedule's times: in its zone.
func LocalTime(zones ScheduleZones, sc services.Schedule, t time.Time) string {
	return t.In(zones.Location(sc)).Format("Mon 2006-01-02 15:04 MST")
}
