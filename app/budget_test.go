package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/budget"
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
		Configure: func(o *app.Config) {
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

// TestMoneyBudgetStopsTheRunBeforeTheCall: with a daily money budget for
// the main conversation (BUDGET_DAILY_USD) and the model's price
// (LLM_PRICES), a call whose reservation (prompt at the input price + the
// largest answer at the output price) would pass the budget is not made:
// the fake model sees no request, the run ends BUDGET_EXCEEDED and the
// owner is told in the conversation the budget in dollars, what was spent
// and when it resets; the question stays in the timeline. At 80 % the
// owner was told once. /budget, /status and GET /api/budget show the
// money.
func TestMoneyBudgetStopsTheRunBeforeTheCall(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	// Each answer reports 9,000 prompt tokens (3,000 of them cached) and
	// 100 out: at $10 / $1 / $10 per million, 6,000×10 + 3,000×1 + 100×10
	// = 64,000 µ$ = $0.064 of the $0.08 budget.
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		rep := llmtest.Echo(r)
		rep.Usage = llmtest.Usage{PromptTokens: 9000, CachedTokens: 3000, CompletionTokens: 100}
		return rep
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) {
			prices, err := budget.ParsePrices(`{"gpt-4o-mini":{"input":10,"cached_input":1,"output":10}}`)
			if err != nil {
				t.Fatal(err)
			}
			o.Budget.Prices = prices
			o.Budget.Money = budget.MoneyLimits{services.BudgetMain: services.MoneyFromUSD(0.08)}
		}})
	if reply := ask(t, in, "first question"); !strings.Contains(reply, "first question") {
		t.Fatalf("first answer: %q", reply)
	}
	calls := model.RequestCount()

	// Spent $0.064; the next call reserves at least its largest answer
	// (4,000 tokens at $10 per million: $0.04): refused before the call.
	reply := ask(t, in, "second question")
	for _, want := range []string{"I stopped before the next model call", "the daily budget for the main conversation ($0.08) would be passed",
		"$0.064 spent today", "this call to gpt-4o-mini may cost up to $", "resets at"} {
		if !strings.Contains(reply, want) {
			t.Fatalf("the notice %q lacks %q", reply, want)
		}
	}
	if n := model.RequestCount(); n != calls {
		t.Fatalf("the model got %d more request(s) past the budget", n-calls)
	}
	var status, errText string
	if err := in.App.Pool().QueryRow(context.Background(), `SELECT r.status, coalesce(r.error, '') FROM agent_runs r
		JOIN chat_messages m ON m.id = r.trigger_message_id WHERE m.content = 'second question'`).Scan(&status, &errText); err != nil {
		t.Fatal(err)
	}
	if status != string(services.RunError) || !strings.Contains(errText, "$0.08") {
		t.Fatalf("the refused run: %s %q", status, errText)
	}
	// Nothing lost: the question is in the timeline, visible, for /retry
	// once the budget allows.
	var kept bool
	for _, m := range visibleFrom(t, in, services.SourceWeb) {
		kept = kept || m.Content == "second question"
	}
	if !kept {
		t.Fatal("the refused question is not in the timeline")
	}
	var warnings int
	for _, m := range visibleFrom(t, in, services.SourceSystem) {
		if strings.Contains(m.Content, "$0.064 of today's $0.08 budget for the main conversation is spent (80%)") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("the owner was told %d times at 80 %%", warnings)
	}

	var report services.BudgetReport
	if code := apiCall(t, in, "GET", "/api/budget", "", &report); code != http.StatusOK {
		t.Fatalf("GET /api/budget: %d", code)
	}
	var main services.BudgetKindToday
	for _, k := range report.Kinds {
		if k.Kind == services.BudgetMain {
			main = k
		}
	}
	if main.LimitCost != services.MoneyFromUSD(0.08) || main.SpentCost != 64000 || main.ReservedCost != 0 || main.Refused != 1 {
		t.Fatalf("report's main line: %+v", main)
	}
	if reply := ask(t, in, "/budget"); !strings.Contains(reply, "$0.064 of $0.08 (80%)") {
		t.Fatalf("/budget: %q", reply)
	}
	if reply := ask(t, in, "/status"); !strings.Contains(reply, "the main conversation 9,100 tokens, $0.064 of $0.08") {
		t.Fatalf("/status: %q", reply)
	}
}

// TestMoneyBudgetNeedsAPrice: a money budget with a model the service
// calls that has no price refuses to start, naming the model and how to
// price it.
func TestMoneyBudgetNeedsAPrice(t *testing.T) {
	t.Parallel()
	// No instance starts: the app's pool of 4 at most, not the package's
	// share for a test starting instances (apptest.TestConns), so the test
	// does not wait for room for one.
	dbtest.Reserve(t, 5)
	o := app.Config{DatabaseURL: apptest.FrugalURL(apptest.SchemaURL(t)), PoolSize: 4, OwnerToken: apptest.Token,
		WorkspaceDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	o.LLM.Provider, o.LLM.BaseURL, o.LLM.Model = "openai", "http://127.0.0.1:9/v1", "mystery-model"
	o.Budget.Money = budget.MoneyLimits{services.BudgetSchedule: services.MoneyFromUSD(1)}
	a, err := app.New(context.Background(), o)
	if err == nil {
		a.Close(context.Background())
		t.Fatal("started with a money budget and an unpriced model")
	}
	if !strings.Contains(err.Error(), `model "mystery-model" has no price: add it to LLM_PRICES`) {
		t.Fatalf("error: %v", err)
	}
}
