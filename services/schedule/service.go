package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services"
)

// Limits bound what the owner may schedule.
type Limits struct {
	// MinInterval is the shortest time between two fires (default 1 minute).
	MinInterval time.Duration
	// MaxActive is how many active schedules one timeline may have
	// (default 20).
	MaxActive int
	// MaxFailures is how many failed fires in a row pause a schedule
	// (default 3).
	MaxFailures int
}

// MaxTaskBytes bounds a schedule's task text.
const MaxTaskBytes = 8000

// Options configure the Service.
type Options struct {
	Store services.Store
	Queue services.ScheduleQueue
	// Location is the owner's time zone, the default of new schedules
	// (OWNER_TIMEZONE); nil: the server's.
	Location *time.Location
	Limits   Limits
	// Profiles reports whether a sub-agent profile exists (nil: none do).
	Profiles func(name string) bool
	// Watcher validates watches (nil: schedules cannot watch).
	Watcher services.Watcher
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Service implements services.Schedules (the owner's controls) and
// services.ScheduleFires (the fire ledger).
type Service struct{ opts Options }

var (
	_ services.Schedules     = (*Service)(nil)
	_ services.ScheduleFires = (*Service)(nil)
)

// New returns a Service.
func New(opts Options) *Service {
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Limits.MinInterval <= 0 {
		opts.Limits.MinInterval = time.Minute
	}
	if opts.Limits.MaxActive <= 0 {
		opts.Limits.MaxActive = 20
	}
	if opts.Limits.MaxFailures <= 0 {
		opts.Limits.MaxFailures = 3
	}
	return &Service{opts: opts}
}

// Limits are the limits in force.
func (s *Service) Limits() Limits { return s.opts.Limits }

// ZoneName is the name the owner's zone is stored under.
func (s *Service) ZoneName() string { return s.opts.Location.String() }

// Location is the zone a schedule's times are shown in.
func (s *Service) Location(sc services.Schedule) *time.Location {
	if loc, err := time.LoadLocation(sc.Timezone); err == nil {
		return loc
	}
	return s.opts.Location
}

// SpecOf parses a stored schedule's spec.
func (s *Service) SpecOf(sc services.Schedule) (Spec, error) {
	return ParseSpec(sc.Kind, sc.Spec, s.Location(sc))
}

var notifyPolicies = map[string]services.NotifyPolicy{
	"always": services.NotifyAlways, "on_change": services.NotifyOnChange, "on_finding": services.NotifyOnFinding,
}

// apply validates r onto sc (a new schedule, or a copy of the stored one)
// and reports whether the time rule changed.
func (s *Service) apply(sc *services.Schedule, r services.ScheduleRequest, creating bool) (timing bool, err error) {
	if r.Task == nil && creating && r.Watch != nil && (strings.TrimSpace(r.Watch.URL) != "" || strings.TrimSpace(r.Watch.Tool) != "") {
		// A watch alone: the fire reports what changed.
		t := "Tell me what changed at " + strings.TrimSpace(r.Watch.Target()) + "."
		if r.Watch.Tool != "" {
			t = "Tell me what changed in the result of " + strings.TrimSpace(r.Watch.Target()) + "."
		}
		r.Task = &t
	}
	if r.Task != nil {
		t := strings.TrimSpace(*r.Task)
		switch {
		case t == "":
			return false, services.Errorf(services.EINVALID, "task is empty: say what to do at each fire")
		case !utf8.ValidString(t) || strings.IndexByte(t, 0) >= 0:
			return false, services.Errorf(services.EINVALID, "task is not valid text")
		case len(t) > MaxTaskBytes:
			return false, services.Errorf(services.ETOOLARGE, "task is %d bytes; the limit is %d", len(t), MaxTaskBytes)
		}
		sc.Task = t
	} else if creating {
		return false, services.Errorf(services.EINVALID, "task is missing: say what to do at each fire")
	}
	if r.Name != nil {
		n := strings.TrimSpace(*r.Name)
		if utf8.RuneCountInString(n) > 80 || strings.ContainsAny(n, "\n\r\x00") {
			return false, services.Errorf(services.EINVALID, "name must be one line of at most 80 characters")
		}
		sc.Name = n
	}
	if sc.Name == "" {
		sc.Name = defaultName(sc.Task)
	}
	if r.Timezone != nil {
		loc, err := LoadZone(*r.Timezone)
		if err != nil {
			return false, err
		}
		sc.Timezone, timing = loc.String(), true
	} else if creating {
		sc.Timezone = s.opts.Location.String()
	}
	var given []string
	for _, k := range []struct {
		v    *string
		kind services.ScheduleKind
	}{{r.At, services.ScheduleAt}, {r.Every, services.ScheduleEvery}, {r.Cron, services.ScheduleCron}} {
		if k.v != nil {
			given = append(given, string(k.kind))
			sc.Kind, sc.Spec, timing = k.kind, *k.v, true
		}
	}
	switch {
	case len(given) > 1:
		return false, services.Errorf(services.EINVALID, "give one of at, every and cron, not %s", strings.Join(given, " and "))
	case len(given) == 0 && creating:
		return false, services.Errorf(services.EINVALID, "say when: one of at (a time), every (an interval such as 30m) or cron (5 fields)")
	}
	if r.Notify != nil {
		p, ok := notifyPolicies[strings.TrimSpace(*r.Notify)]
		if !ok {
			return false, services.Errorf(services.EINVALID, "notify %q is not one of always, on_change, on_finding", *r.Notify)
		}
		sc.Notify = p
	} else if creating {
		sc.Notify = services.NotifyOnChange
		if sc.Kind == services.ScheduleAt {
			sc.Notify = services.NotifyAlways
		}
	}
	if r.Profile != nil {
		p := strings.TrimSpace(*r.Profile)
		if p != "" && (s.opts.Profiles == nil || !s.opts.Profiles(p)) {
			return false, services.Errorf(services.EINVALID, "unknown profile %q (AGENT_PROFILES names the profiles)", p)
		}
		sc.Profile = p
	}
	if r.Watch != nil {
		if err := s.applyWatch(sc, *r.Watch); err != nil {
			return false, err
		}
	}
	if timing && sc.Kind == services.ScheduleAt {
		// "in 20m" / "+2h": from now, stored as the time it comes to.
		t := strings.TrimSpace(sc.Spec)
		if rel, ok := strings.CutPrefix(t, "in "); ok || strings.HasPrefix(t, "+") {
			if !ok {
				rel = t[1:]
			}
			d, err := ParseInterval(rel)
			if err != nil {
				return false, services.Errorf(services.EINVALID, "at %q: %s", t, strings.TrimPrefix(services.ErrorMessage(err), "every "))
			}
			sc.Spec = s.opts.Now().Add(d).Truncate(time.Second).In(s.Location(*sc)).Format(time.RFC3339)
		}
	}
	if timing {
		spec, err := ParseSpec(sc.Kind, sc.Spec, s.Location(*sc))
		if err != nil {
			return false, err
		}
		sc.Spec = spec.Text
		if gap := spec.MinGap(s.opts.Now()); gap > 0 && gap < s.opts.Limits.MinInterval {
			if sc.Kind == services.ScheduleEvery {
				return false, services.Errorf(services.EINVALID, "every %s is below the minimum interval of %s", spec.Text, s.opts.Limits.MinInterval)
			}
			return false, services.Errorf(services.EINVALID, "cron %q fires as often as every %s, below the minimum interval of %s", spec.Text, gap, s.opts.Limits.MinInterval)
		}
	}
	return timing, nil
}

// MaxIgnore bounds a watch's ignore patterns.
const MaxIgnore = 20

// applyWatch validates w onto sc: a new or changed watch starts from no
// content (its next fire is a first look); an empty URL removes it.
func (s *Service) applyWatch(sc *services.Schedule, w services.Watch) error {
	w.URL, w.Selector, w.Pattern, w.Tool = strings.TrimSpace(w.URL), strings.TrimSpace(w.Selector), strings.TrimSpace(w.Pattern), strings.TrimSpace(w.Tool)
	if a := strings.TrimSpace(string(w.Arguments)); a == "" || a == "null" {
		w.Arguments = nil
	}
	if w.URL == "" && w.Tool == "" {
		if w.Selector != "" || w.Pattern != "" || len(w.Ignore) > 0 || w.Arguments != nil {
			return services.Errorf(services.EINVALID, "watch.url is missing: say which page to watch (or give watch.tool)")
		}
		sc.Watch, sc.WatchHash, sc.WatchText = nil, "", ""
		return nil
	}
	if len(w.Ignore) > MaxIgnore {
		return services.Errorf(services.EINVALID, "watch.ignore has %d patterns; the limit is %d", len(w.Ignore), MaxIgnore)
	}
	if s.opts.Watcher == nil {
		return services.Errorf(services.EUNAVAILABLE, "this server cannot watch pages")
	}
	if err := s.opts.Watcher.ValidateWatch(w); err != nil {
		return err
	}
	if sc.Watch == nil || !sameWatch(*sc.Watch, w) {
		sc.WatchHash, sc.WatchText = "", ""
	}
	sc.Watch = &w
	return nil
}

func sameWatch(a, b services.Watch) bool {
	return a.URL == b.URL && a.Tool == b.Tool && canonicalJSON(a.Arguments) == canonicalJSON(b.Arguments) && a.Selector == b.Selector &&
		a.Pattern == b.Pattern && strings.Join(a.Ignore, "\x00") == strings.Join(b.Ignore, "\x00")
}

// canonicalJSON is raw re-encoded (keys sorted, no spacing), as stored
// JSON comes back in another spacing.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// defaultName is the first words of the task.
func defaultName(task string) string {
	line, _, _ := strings.Cut(task, "\n")
	words := strings.Fields(line)
	if len(words) > 6 {
		words = words[:6]
	}
	n := strings.Join(words, " ")
	if r := []rune(n); len(r) > 60 {
		n = string(r[:60]) + "…"
	}
	return n
}

// schedule sets sc's next fire from now (a new or resumed schedule).
func (s *Service) schedule(sc *services.Schedule) error {
	spec, err := s.SpecOf(*sc)
	if err != nil {
		return err
	}
	next, err := spec.First(s.opts.Now())
	if err != nil {
		return err
	}
	sc.NextFireAt = &next
	return nil
}

// Create validates and stores a new schedule with its first fire's job.
func (s *Service) Create(ctx context.Context, timeline string, r services.ScheduleRequest) (services.Schedule, error) {
	sc := services.Schedule{TimelineScope: timeline, State: services.ScheduleActive}
	if r.State != nil && *r.State != string(services.ScheduleActive) {
		return sc, services.Errorf(services.EINVALID, "a new schedule is active; pause it afterwards")
	}
	if _, err := s.apply(&sc, r, true); err != nil {
		return sc, err
	}
	if err := s.schedule(&sc); err != nil {
		return sc, err
	}
	var out services.Schedule
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		if err := s.checkActive(ctx, tx, timeline); err != nil {
			return err
		}
		var err error
		if out, err = tx.CreateSchedule(ctx, sc); err != nil {
			return err
		}
		return s.opts.Queue.EnqueueFireTx(ctx, tx, out.ID, *out.NextFireAt)
	})
	return out, err
}

// checkActive refuses one more active schedule of timeline over the limit.
// It locks the timeline's active schedules for the rest of tx first, so
// the count and the insert or change that follows are one decision.
func (s *Service) checkActive(ctx context.Context, tx services.Tx, timeline string) error {
	if err := tx.LockActiveSchedules(ctx, timeline); err != nil {
		return err
	}
	all, err := tx.ListSchedules(ctx, timeline, false)
	if err != nil {
		return err
	}
	n := 0
	for _, x := range all {
		if x.State == services.ScheduleActive {
			n++
		}
	}
	if n >= s.opts.Limits.MaxActive {
		return services.Errorf(services.ECONFLICT, "this conversation has %d active schedules, the limit; pause or delete one first", n)
	}
	return nil
}

// Get returns one schedule of timeline.
func (s *Service) Get(ctx context.Context, timeline string, id int64) (services.Schedule, error) {
	sc, err := s.opts.Store.GetSchedule(ctx, id)
	if err != nil {
		return sc, err
	}
	if sc.TimelineScope != timeline || sc.State == services.ScheduleDeleted {
		return services.Schedule{}, services.Errorf(services.ENOTFOUND, "no schedule #%d", id)
	}
	return sc, nil
}

// GetWithFires returns one schedule of timeline with its last fires.
func (s *Service) GetWithFires(ctx context.Context, timeline string, id int64, fires int) (services.ScheduleWithFires, error) {
	sc, err := s.Get(ctx, timeline, id)
	if err != nil {
		return services.ScheduleWithFires{}, err
	}
	w := services.ScheduleWithFires{Schedule: sc, Fires: []services.ScheduleFire{}}
	if fires > 0 {
		if w.Fires, err = s.opts.Store.ListFires(ctx, id, fires); err != nil {
			return w, err
		}
	}
	return w, nil
}

// Update changes a schedule; see services.Schedules.
func (s *Service) Update(ctx context.Context, timeline string, id int64, version int, r services.ScheduleRequest) (services.Schedule, error) {
	var out services.Schedule
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		sc, err := tx.GetSchedule(ctx, id)
		if err != nil {
			return err
		}
		if sc.TimelineScope != timeline || sc.State == services.ScheduleDeleted {
			return services.Errorf(services.ENOTFOUND, "no schedule #%d", id)
		}
		if version != 0 && version != sc.Version {
			return services.Errorf(services.ECONFLICT, "schedule #%d is at version %d, not %d: it was changed meanwhile; read it again", id, sc.Version, version)
		}
		was := sc.State
		timing, err := s.apply(&sc, r, false)
		if err != nil {
			return err
		}
		reschedule := timing && was != services.SchedulePaused
		if r.State != nil {
			switch services.ScheduleState(strings.TrimSpace(*r.State)) {
			case services.SchedulePaused:
				if sc.State == services.ScheduleDone {
					return services.Errorf(services.EINVALID, "schedule #%d is done; there is nothing to pause", id)
				}
				sc.State, sc.StateReason, sc.NextFireAt, reschedule = services.SchedulePaused, "paused by the owner", nil, false
			case services.ScheduleActive:
				if was != services.ScheduleActive {
					if err := s.checkActive(ctx, tx, timeline); err != nil {
						return err
					}
					sc.State, sc.StateReason, sc.Failures, reschedule = services.ScheduleActive, "", 0, true
				}
			default:
				return services.Errorf(services.EINVALID, "state %q is not one of active, paused", *r.State)
			}
		} else if timing && was == services.ScheduleDone {
			// A one-shot that fired, given a new time, fires again.
			if err := s.checkActive(ctx, tx, timeline); err != nil {
				return err
			}
			sc.State, reschedule = services.ScheduleActive, true
		}
		if reschedule {
			if err := s.schedule(&sc); err != nil {
				return err
			}
		}
		if out, err = tx.UpdateSchedule(ctx, sc); err != nil {
			return err
		}
		if reschedule {
			return s.opts.Queue.EnqueueFireTx(ctx, tx, out.ID, *out.NextFireAt)
		}
		return nil
	})
	return out, err
}

// Delete stops and hides a schedule.
func (s *Service) Delete(ctx context.Context, timeline string, id int64) (services.Schedule, error) {
	var out services.Schedule
	err := s.opts.Store.Transact(ctx, func(tx services.Tx) error {
		sc, err := tx.GetSchedule(ctx, id)
		if err != nil {
			return err
		}
		if sc.TimelineScope != timeline || sc.State == services.ScheduleDeleted {
			return services.Errorf(services.ENOTFOUND, "no schedule #%d", id)
		}
		sc.State, sc.StateReason, sc.NextFireAt = services.ScheduleDeleted, "deleted by the owner", nil
		out, err = tx.UpdateSchedule(ctx, sc)
		return err
	})
	return out, err
}

// List returns timeline's schedules with their latest fires.
func (s *Service) List(ctx context.Context, timeline string, fires int) ([]services.ScheduleWithFires, error) {
	all, err := s.opts.Store.ListSchedules(ctx, timeline, false)
	if err != nil {
		return nil, err
	}
	out := make([]services.ScheduleWithFires, 0, len(all))
	for _, sc := range all {
		w := services.ScheduleWithFires{Schedule: sc, Fires: []services.ScheduleFire{}}
		if fires > 0 {
			if w.Fires, err = s.opts.Store.ListFires(ctx, sc.ID, fires); err != nil {
				return nil, err
			}
		}
		out = append(out, w)
	}
	return out, nil
}

// BeginFireTx starts the fire due at at; see services.ScheduleFires.
func (s *Service) BeginFireTx(ctx context.Context, tx services.Tx, id int64, at time.Time) (services.Schedule, services.ScheduleFire, error) {
	sc, err := tx.GetSchedule(ctx, id)
	if err != nil {
		return sc, services.ScheduleFire{}, err
	}
	if sc.State != services.ScheduleActive || sc.NextFireAt == nil || !sc.NextFireAt.Equal(at) {
		return sc, services.ScheduleFire{}, services.Errorf(services.ENOTFOUND, "schedule #%d has no fire due at %s", id, at.Format(time.RFC3339))
	}
	spec, err := s.SpecOf(sc)
	if err != nil {
		return sc, services.ScheduleFire{}, err
	}
	now := s.opts.Now()
	fire, err := tx.InsertFire(ctx, services.ScheduleFire{ScheduleID: id, FireAt: at, Missed: missed(spec, at, now)})
	if services.IsKind(err, services.ECONFLICT) {
		return sc, fire, services.Errorf(services.ENOTFOUND, "schedule #%d already fired at %s", id, at.Format(time.RFC3339))
	}
	if err != nil {
		return sc, fire, err
	}
	sc.LastFireAt = &at
	sc.NextFireAt = nil
	if next, ok := spec.Next(at, now); ok {
		sc.NextFireAt = &next
	}
	if sc, err = tx.UpdateSchedule(ctx, sc); err != nil {
		return sc, fire, err
	}
	if sc.NextFireAt != nil {
		if err := s.opts.Queue.EnqueueFireTx(ctx, tx, id, *sc.NextFireAt); err != nil {
			return sc, fire, err
		}
	}
	return sc, fire, nil
}

// CatchUpAfter is how late a fire must begin before the fire times it
// passed over count as missed (River makes a due job available within
// about 5 s, 20 s after a leader's crash).
const CatchUpAfter = time.Minute

// missed counts the fire times after at up to now that a fire due at at
// and beginning at now runs for (the service was down): none when it
// begins less than CatchUpAfter late.
func missed(spec Spec, at, now time.Time) int {
	if now.Sub(at) < CatchUpAfter {
		return 0
	}
	n := 0
	for t := at; n < 10000; n++ {
		next, ok := spec.Next(t, t)
		if !ok || !next.Before(now) {
			break
		}
		t = next
	}
	return n
}

// EndFireTx records the end of a fire; see services.ScheduleFires.
func (s *Service) EndFireTx(ctx context.Context, tx services.Tx, id int64, f services.ScheduleFire, r services.FireResult) (services.Schedule, services.ScheduleFire, services.FireDecision, error) {
	var d services.FireDecision
	sc, err := tx.GetSchedule(ctx, id)
	if err != nil {
		return sc, f, d, err
	}
	now := s.opts.Now()
	f.Status, f.Result, f.Error, f.FinishedAt = r.Status, r.Answer, r.Error, &now
	f.Tokens, f.ModelCalls = r.Tokens, r.ModelCalls
	sc.LastStatus = string(r.Status)
	if r.Watch != nil {
		f.ContentHash = r.Watch.Hash
		if r.Status == services.FireOK || r.Status == services.FireUnchanged {
			// The content this fire judged is the next fire's "previous";
			// a failed or skipped fire leaves it, so the next one sees the
			// change again.
			sc.WatchHash, sc.WatchText = r.Watch.Hash, r.Watch.Text
		}
	}
	d.Notify, d.Message = Decide(sc, r)
	if sc.State == services.ScheduleDeleted {
		d.Notify = false // deleted while this fire ran: the owner wants no more of it
	}
	switch r.Status {
	case services.FireOK, services.FireUnchanged:
		sc.Failures = 0
	case services.FireSkipped: // a budget refused it: not a failure
	default:
		sc.Failures++
		if sc.Failures >= s.opts.Limits.MaxFailures && sc.State == services.ScheduleActive && sc.Kind != services.ScheduleAt {
			sc.State, sc.NextFireAt = services.SchedulePaused, nil
			sc.StateReason = fmt.Sprintf("paused after %d failed runs in a row; last: %s", sc.Failures, r.Error)
			d.Paused = true
			d.PauseNotice = fmt.Sprintf("Schedule #%d %q is paused: its last %d runs failed (the last one: %s). `/schedules resume %d` turns it back on.",
				sc.ID, sc.Name, sc.Failures, r.Error, sc.ID)
		}
	}
	if sc.Kind == services.ScheduleAt && sc.State == services.ScheduleActive && sc.NextFireAt == nil {
		sc.State, sc.StateReason = services.ScheduleDone, ""
	}
	if d.Notify {
		sc.LastNotified = d.Message
		f.Notified = true
	}
	if err := tx.UpdateFire(ctx, f); err != nil {
		return sc, f, d, err
	}
	sc, err = tx.UpdateSchedule(ctx, sc)
	return sc, f, d, err
}

// Decide applies a schedule's notify policy to a fire's result: always
// (a reminder reaches the owner even when its run failed), on_finding
// (when the fire found something), on_change (when that differs from what
// the owner was last told).
//
// A watch fire is decided by its content and the model's structured
// verdict, not by the wording of its answer: an unchanged fire never
// tells, nor does a failed one; a changed one tells when the model said it
// is news (always and on_finding alike; on_change does not compare the
// wording with the last message, since the content itself changed).
func Decide(sc services.Schedule, r services.FireResult) (bool, string) {
	answer := strings.TrimSpace(r.Answer)
	if sc.Watch != nil {
		// Failures are on the receipt, and pause the schedule after too
		// many in a row (with a notice of their own).
		return r.Status == services.FireOK && r.News && answer != "", answer
	}
	nothing := answer == "" || IsNothingNew(answer)
	switch sc.Notify {
	case services.NotifyAlways:
		switch {
		case r.Status != services.FireOK:
			return true, fmt.Sprintf("Reminder: %s\n\n(I could not prepare more: %s.)", sc.Task, r.Error)
		case nothing:
			return true, "Reminder: " + sc.Task
		}
		return true, answer
	case services.NotifyOnFinding:
		return r.Status == services.FireOK && !nothing, answer
	default: // on_change
		if r.Status != services.FireOK || nothing {
			return false, answer
		}
		return normalize(answer) != normalize(sc.LastNotified), answer
	}
}

// IsNothingNew reports whether a fire's answer says there is nothing to
// tell (NOTHING_NEW, alone or with a trailing remark).
func IsNothingNew(answer string) bool {
	a := strings.TrimSpace(strings.Trim(strings.TrimSpace(answer), "`*_\"'."))
	return strings.HasPrefix(strings.ToUpper(a), services.NothingNew)
}

func normalize(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
