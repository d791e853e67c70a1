package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestScheduleBudgetStopsALoopingSchedule: a schedule whose fires call a
// failing tool step after step spends the schedules' daily budget of N
// tokens and no more (within one call's reservation); the next call is
// not made, the fire ends skipped (not failed: the schedule is not
// paused), the owner is told once at 80 %, and the main conversation,
// on its own budget, keeps working. /budget and GET /api/budget show it.
func TestScheduleBudgetStopsALoopingSchedule(t *testing.T) {
	t.Parallel()
	const budgetN = 40000
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), fireMarker) {
			return llmtest.Call("read_file", `{"path":"missing/notes.md"}`)
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Options) {
			o.Schedule.Limits.MinInterval, o.Schedule.Limits.MaxFailures = time.Second, 1000
			o.Budget.Limits = map[services.BudgetKind]int64{services.BudgetSchedule: budgetN, services.BudgetMain: 1_000_000}
		}})
	var sc services.Schedule
	if code := apiCall(t, in, "POST", "/api/schedules", `{"name":"Looping","task":"check the notes","every":"1s","notify":"on_change"}`, &sc); code != http.StatusCreated {
		t.Fatalf("POST: %d", code)
	}
	skipped := func() int {
		fires, _ := in.Store.ListFires(context.Background(), sc.ID, 100)
		n := 0
		for _, f := range fires {
			if f.Status == services.FireSkipped {
				n++
				if !strings.Contains(f.Error, "skipped: budget") || !strings.Contains(f.Error, "resets at") {
					t.Errorf("skipped fire's reason: %q", f.Error)
				}
			}
		}
		return n
	}
	waitFor(t, "two fires skipped by the budget", func() bool { return skipped() >= 2 })

	var spent, reserved int64
	if err := in.App.Pool().QueryRow(context.Background(), `SELECT spent, reserved FROM budget_days WHERE kind = 'schedule'`).Scan(&spent, &reserved); err != nil {
		t.Fatal(err)
	}
	// One call reserves at most the window (16,000 tokens).
	if spent > budgetN || spent < budgetN-16000 || reserved != 0 {
		t.Fatalf("schedules spent %d tokens (%d still reserved) of a budget of %d", spent, reserved, budgetN)
	}
	got, err := in.Store.GetSchedule(context.Background(), sc.ID)
	if err != nil || got.State != services.ScheduleActive {
		t.Fatalf("the schedule after budget skips: %+v %v", got, err)
	}

	// The main conversation keeps working.
	if reply := ask(t, in, "still there?"); !strings.Contains(reply, "still there?") {
		t.Fatalf("main answer: %q", reply)
	}
	// Told once, however many fires were skipped since.
	n := skipped()
	waitFor(t, "another skipped fire", func() bool { return skipped() > n })
	var warnings int
	for _, m := range visibleFrom(t, in, services.SourceSystem) {
		if strings.Contains(m.Content, "of today's 40,000-token budget for schedules") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("the owner was told %d times", warnings)
	}

	var report services.BudgetReport
	if code := apiCall(t, in, "GET", "/api/budget", "", &report); code != http.StatusOK {
		t.Fatalf("GET /api/budget: %d", code)
	}
	var sched, main services.BudgetKindToday
	for _, k := range report.Kinds {
		switch k.Kind {
		case services.BudgetSchedule:
			sched = k
		case services.BudgetMain:
			main = k
		}
	}
	if sched.Limit != budgetN || sched.Spent != spent || sched.Refused < 2 || main.Spent == 0 || len(report.Days) == 0 {
		t.Fatalf("report: %+v", report)
	}
	if reply := ask(t, in, "/budget"); !strings.Contains(reply, "schedules: ") || !strings.Contains(reply, "of 40,000 tokens") {
		t.Fatalf("/budget: %q", reply)
	}
}
