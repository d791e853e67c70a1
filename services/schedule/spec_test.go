package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseSpecErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	utc := time.UTC
	cases := []struct {
		kind services.ScheduleKind
		text string
		want string
	}{
		{services.ScheduleAt, "tomorrow at 9", `at "tomorrow at 9" is not a time`},
		{services.ScheduleEvery, "often", `every "often" is not an interval`},
		{services.ScheduleEvery, "-5m", "must be longer than zero"},
		{services.ScheduleEvery, "0s", "must be longer than zero"},
		{services.ScheduleCron, "61 * * * *", "cron \"61 * * * *\""},
		{services.ScheduleCron, "* * * *", "has 4 fields; it needs 5"},
		{services.ScheduleCron, "0 0 * * * *", "has 6 fields; it needs 5"},
		{services.ScheduleCron, "CRON_TZ=UTC 0 9 * * *", `use "every" for intervals and "timezone" for the zone`},
		{services.ScheduleCron, "@every 5m", `use "every" for intervals`},
		{"weekly", "x", `unknown schedule kind "weekly"`},
	}
	for _, c := range cases {
		_, err := ParseSpec(c.kind, c.text, utc)
		if err == nil || !services.IsKind(err, services.EINVALID) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: got %v, want EINVALID containing %q", c.kind, c.text, err, c.want)
		}
	}
	if _, err := LoadZone("Mars/Olympus_Mons"); err == nil || !strings.Contains(err.Error(), `unknown time zone "Mars/Olympus_Mons"`) {
		t.Errorf("unknown zone: %v", err)
	}
}

func TestAtIsReadInTheSchedulesZoneAndMustBeAhead(t *testing.T) {
	t.Parallel()
	tokyo := mustZone(t, "Asia/Tokyo")
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC) // 21:00 in Tokyo
	s, err := ParseSpec(services.ScheduleAt, "2026-11-25T09:00", tokyo)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.First(now)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC); !first.Equal(want) {
		t.Fatalf("09:00 Tokyo = %s, want %s", first, want)
	}
	if s.Text != "2026-11-25T09:00:00+09:00" {
		t.Fatalf("stored as %q", s.Text)
	}
	if _, ok := s.Next(first, first.Add(time.Second)); ok {
		t.Fatal("a one-shot has a next fire")
	}
	past, err := ParseSpec(services.ScheduleAt, "2026-11-24T20:59", tokyo) // 11:59 UTC
	if err != nil {
		t.Fatal(err)
	}
	if _, err := past.First(now); err == nil || !strings.Contains(err.Error(), "is in the past") {
		t.Fatalf("a time in the past: %v", err)
	}
	// An explicit offset wins over the zone.
	s, _ = ParseSpec(services.ScheduleAt, "2026-11-25T09:00:00Z", tokyo)
	if first, _ := s.First(now); !first.Equal(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("RFC 3339 with Z: %s", first)
	}
}

func TestEveryCatchesUpOnceAfterDowntime(t *testing.T) {
	t.Parallel()
	s, err := ParseSpec(services.ScheduleEvery, "30m", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	// On time: the next grid point.
	if next, _ := s.Next(t0, t0.Add(2*time.Second)); !next.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("on time: next %s", next)
	}
	// The fire due at 10:00 runs at 12:10 after downtime: the next is 12:30,
	// not 10:30, 11:00, … one by one.
	late := time.Date(2026, 11, 24, 12, 10, 0, 0, time.UTC)
	if next, _ := s.Next(t0, late); !next.Equal(time.Date(2026, 11, 24, 12, 30, 0, 0, time.UTC)) {
		t.Fatalf("after downtime: next %s", next)
	}
	// Exactly on a grid point: strictly after now.
	if next, _ := s.Next(t0, t0.Add(time.Hour)); !next.Equal(t0.Add(90 * time.Minute)) {
		t.Fatalf("on a grid point: next %s", next)
	}
	if got := FormatInterval(90 * time.Minute); got != "1h30m" {
		t.Fatalf("FormatInterval = %q", got)
	}
	if d, err := ParseInterval("2d"); err != nil || d != 48*time.Hour {
		t.Fatalf("2d = %v, %v", d, err)
	}
}

func TestCronFollowsTheZoneAcrossDST(t *testing.T) {
	t.Parallel()
	berlin := mustZone(t, "Europe/Berlin")
	s, err := ParseSpec(services.ScheduleCron, "0 9 * * *", berlin)
	if err != nil {
		t.Fatal(err)
	}
	// Berlin leaves summer time on 2026-10-25: 09:00 is 07:00 UTC before
	// and 08:00 UTC after.
	before := time.Date(2026, 10, 24, 6, 0, 0, 0, time.UTC)
	if n, _ := s.Next(before, before); !n.Equal(time.Date(2026, 10, 24, 7, 0, 0, 0, time.UTC)) {
		t.Fatalf("summer: %s", n)
	}
	after := time.Date(2026, 10, 26, 6, 0, 0, 0, time.UTC)
	if n, _ := s.Next(after, after); !n.Equal(time.Date(2026, 10, 26, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("winter: %s", n)
	}
	if gap := s.MinGap(before); gap < 23*time.Hour {
		t.Fatalf("daily cron min gap %s", gap)
	}
	every, _ := ParseSpec(services.ScheduleCron, "*/5 * * * *", berlin)
	if gap := every.MinGap(before); gap != 5*time.Minute {
		t.Fatalf("*/5 min gap %s", gap)
	}
}

func TestDecideAppliesTheNotifyPolicy(t *testing.T) {
	t.Parallel()
	ok := func(a string) services.FireResult { return services.FireResult{Status: services.FireOK, Answer: a} }
	failed := services.FireResult{Status: services.FireError, Error: "the model timed out"}
	cases := []struct {
		name   string
		policy services.NotifyPolicy
		last   string
		r      services.FireResult
		notify bool
		msg    string
	}{
		{"reminder", services.NotifyAlways, "", ok("Call Anna now."), true, "Call Anna now."},
		{"reminder with nothing to add", services.NotifyAlways, "", ok("NOTHING_NEW"), true, "Reminder: call Anna"},
		{"reminder whose run failed still reminds", services.NotifyAlways, "", failed, true, "Reminder: call Anna"},
		{"finding", services.NotifyOnFinding, "x", ok("Tickets!"), true, "Tickets!"},
		{"no finding", services.NotifyOnFinding, "", ok("NOTHING_NEW"), false, ""},
		{"no finding, decorated", services.NotifyOnFinding, "", ok("`NOTHING_NEW`."), false, ""},
		{"first change", services.NotifyOnChange, "", ok("Tickets available"), true, "Tickets available"},
		{"same again", services.NotifyOnChange, "Tickets available", ok("tickets   AVAILABLE"), false, ""},
		{"changed", services.NotifyOnChange, "Tickets available", ok("Sold out"), true, "Sold out"},
		{"failed monitor is quiet", services.NotifyOnChange, "", failed, false, ""},
	}
	for _, c := range cases {
		sc := services.Schedule{Task: "call Anna", Notify: c.policy, LastNotified: c.last}
		notify, msg := Decide(sc, c.r)
		if notify != c.notify || (notify && !strings.HasPrefix(msg, c.msg)) {
			t.Errorf("%s: notify=%v msg=%q, want %v %q", c.name, notify, msg, c.notify, c.msg)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "*/5 * * * *", "@daily", "30m", "1d", "2026-05-01T09:00", "2026-05-01T09:00:00+02:00", "", "* * * * * *"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, text string) {
		for _, kind := range []services.ScheduleKind{services.ScheduleAt, services.ScheduleEvery, services.ScheduleCron} {
			s, err := ParseSpec(kind, text, time.UTC)
			if err != nil {
				if !services.IsKind(err, services.EINVALID) {
					t.Fatalf("%s %q: error of kind %s: %v", kind, text, services.ErrorKind(err), err)
				}
				continue
			}
			// What was accepted reads back the same.
			again, err := ParseSpec(kind, s.Text, time.UTC)
			if err != nil || again.Text != s.Text {
				t.Fatalf("%s %q stored as %q, which reads back as %q, %v", kind, text, s.Text, again.Text, err)
			}
			first, err := s.First(now)
			if err == nil && kind != services.ScheduleAt && !first.After(now) {
				t.Fatalf("%s %q: first fire %s is not after now", kind, text, first)
			}
			if err != nil && !services.IsKind(err, services.EINVALID) {
				t.Fatalf("%s %q: first fire error of kind %s: %v", kind, text, services.ErrorKind(err), err)
			}
			_ = s.MinGap(now)
		}
	})
}
