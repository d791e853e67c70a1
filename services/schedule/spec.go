// Package schedule keeps the owner's schedules: it parses and validates
// when a schedule fires (a one-shot time, a fixed interval or a cron
// expression, in a time zone), stores schedules with their next fire's job
// in one transaction, and keeps the ledger of fires (each fire begins once,
// advances the schedule, and ends with a decision: tell the owner or not,
// pause after too many failures). The agent runtime runs the fires.
package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/switchboard/switchboard/services"
)

// Spec is a parsed rule for when a schedule fires.
type Spec struct {
	Kind services.ScheduleKind
	// Text is the spec as stored: the RFC 3339 time, the interval, the
	// cron expression.
	Text string
	Loc  *time.Location

	at    time.Time
	every time.Duration
	cron  cron.Schedule
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// LoadZone loads an IANA time zone name; EINVALID names an unknown one.
func LoadZone(name string) (*time.Location, error) {
	if strings.TrimSpace(name) == "" {
		return nil, services.Errorf(services.EINVALID, "time zone is empty; use an IANA name such as Europe/Berlin")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, services.Errorf(services.EINVALID, "unknown time zone %q; use an IANA name such as Europe/Berlin or America/New_York", name)
	}
	return loc, nil
}

// localLayouts are the forms of an "at" time without a zone offset, read
// in the schedule's zone.
var localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

// ParseSpec parses a spec of kind in zone loc. EINVALID says what is wrong.
func ParseSpec(kind services.ScheduleKind, text string, loc *time.Location) (Spec, error) {
	text = strings.TrimSpace(text)
	s := Spec{Kind: kind, Text: text, Loc: loc}
	switch kind {
	case services.ScheduleAt:
		t, err := time.Parse(time.RFC3339, text)
		if err != nil {
			var lerr error
			for _, layout := range localLayouts {
				if t, lerr = time.ParseInLocation(layout, text, loc); lerr == nil {
					break
				}
			}
			if lerr != nil {
				return s, services.Errorf(services.EINVALID, "at %q is not a time: use RFC 3339, e.g. 2026-05-01T09:00:00+02:00, or 2026-05-01T09:00 in the schedule's time zone", text)
			}
		}
		s.at = t
		s.Text = t.Format(time.RFC3339)
	case services.ScheduleEvery:
		d, err := ParseInterval(text)
		if err != nil {
			return s, err
		}
		s.every = d
		s.Text = FormatInterval(d)
	case services.ScheduleCron:
		if strings.HasPrefix(text, "@every") || strings.HasPrefix(text, "CRON_TZ=") || strings.HasPrefix(text, "TZ=") {
			return s, services.Errorf(services.EINVALID, "cron %q: use \"every\" for intervals and \"timezone\" for the zone", text)
		}
		if !strings.HasPrefix(text, "@") && len(strings.Fields(text)) != 5 {
			return s, services.Errorf(services.EINVALID, "cron %q has %d fields; it needs 5: minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1-5\"", text, len(strings.Fields(text)))
		}
		c, err := cronParser.Parse(text)
		if err != nil {
			return s, services.Errorf(services.EINVALID, "cron %q: %v", text, err)
		}
		s.cron = c
		s.Text = strings.Join(strings.Fields(text), " ")
	default:
		return s, services.Errorf(services.EINVALID, "unknown schedule kind %q (at, every or cron)", kind)
	}
	return s, nil
}

// ParseInterval reads an interval such as "30m", "1h30m", "2d" (days) or
// "90s". EINVALID when it is not one or not positive.
func ParseInterval(text string) (time.Duration, error) {
	t := strings.TrimSpace(strings.ToLower(text))
	var d time.Duration
	if n, ok := strings.CutSuffix(t, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, services.Errorf(services.EINVALID, "every %q is not an interval: use e.g. 30m, 2h, 1h30m or 1d", text)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(t); err != nil {
			return 0, services.Errorf(services.EINVALID, "every %q is not an interval: use e.g. 30m, 2h, 1h30m or 1d", text)
		}
	}
	if d <= 0 {
		return 0, services.Errorf(services.EINVALID, "every %q must be longer than zero", text)
	}
	return d, nil
}

// FormatInterval writes d as ParseInterval reads it ("30m", "1h30m", "2d").
func FormatInterval(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return services.ShortDuration(d)
}

// First is the first fire time of a new (or resumed) schedule: the "at"
// time, which must be after now; now plus the interval; the cron
// expression's next time after now.
func (s Spec) First(now time.Time) (time.Time, error) {
	switch s.Kind {
	case services.ScheduleAt:
		if !s.at.After(now) {
			return time.Time{}, services.Errorf(services.EINVALID, "at %s is in the past (it is now %s)",
				s.at.In(s.Loc).Format(time.RFC3339), now.In(s.Loc).Format(time.RFC3339))
		}
		return s.at, nil
	case services.ScheduleEvery:
		return now.Add(s.every).Truncate(time.Second), nil
	default:
		next := s.cron.Next(now.In(s.Loc))
		if next.IsZero() {
			return next, services.Errorf(services.EINVALID, "cron %q never fires (no matching time in the next five years)", s.Text)
		}
		return next, nil
	}
}

// Next is the fire time after a fire due at prev that runs at now: none
// for a one-shot; for an interval the next point of prev's grid after now
// (fires missed while the service was down are caught up once, not one by
// one); for cron the next time after now.
func (s Spec) Next(prev, now time.Time) (time.Time, bool) {
	switch s.Kind {
	case services.ScheduleAt:
		return time.Time{}, false
	case services.ScheduleEvery:
		next := prev.Add(s.every)
		if !next.After(now) {
			n := now.Sub(prev)/s.every + 1
			next = prev.Add(n * s.every)
		}
		return next, true
	default:
		next := s.cron.Next(now.In(s.Loc))
		return next, !next.IsZero()
	}
}

// MinGap is the shortest time between two fires: the interval, or for
// cron the shortest gap between its next fires (a year ahead at most);
// a one-shot has none (0).
func (s Spec) MinGap(now time.Time) time.Duration {
	switch s.Kind {
	case services.ScheduleEvery:
		return s.every
	case services.ScheduleCron:
		gap := time.Duration(0)
		t := s.cron.Next(now.In(s.Loc))
		for range 60 {
			n := s.cron.Next(t)
			if n.IsZero() {
				break
			}
			if d := n.Sub(t); gap == 0 || d < gap {
				gap = d
			}
			t = n
		}
		return gap
	}
	return 0
}

// Describe says in words when the schedule fires ("every 30m", "at
// 2026-05-01 09:00 CEST", "cron 0 9 * * 1-5 (Europe/Berlin)").
func (s Spec) Describe() string {
	switch s.Kind {
	case services.ScheduleAt:
		return "once at " + s.at.In(s.Loc).Format("2006-01-02 15:04 MST")
	case services.ScheduleEvery:
		return "every " + s.Text
	default:
		return "cron " + s.Text + " (" + s.Loc.String() + ")"
	}
}
