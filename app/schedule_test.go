package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

const (
	schedTGToken = "123456:schedule-test-token"
	ownerTG      = 1
	fireMarker   = "Scheduled task"
)

// ticketsPage serves "No tickets yet" until its nth request, then
// "Tickets available".
func ticketsPage(t *testing.T, nth int64) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if hits.Add(1) >= nth {
			fmt.Fprint(w, `<html><body><h1>Box office</h1><p><b>Tickets available</b> from today.</p></body></html>`)
			return
		}
		fmt.Fprint(w, `<html><body><h1>Box office</h1><p>No tickets yet.</p></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// monitorModel answers as a model that follows the fire's instructions: a
// fire fetches the page and answers what it found or NOTHING_NEW; the main
// agent answers the owner.
func monitorModel(url string) func(llmtest.Request) llmtest.Reply {
	return func(r llmtest.Request) llmtest.Reply {
		fire := strings.Contains(string(r.Body), fireMarker)
		switch {
		case fire && !r.LastIsToolResult:
			return llmtest.Call("fetch_url", `{"url":"`+url+`"}`)
		case fire && strings.Contains(r.LastMessage, "Tickets available"):
			return llmtest.Text("Tickets are available now at " + url)
		case fire:
			return llmtest.Text("NOTHING_NEW")
		case r.LastIsToolResult:
			return llmtest.Text("Done: I will tell you when tickets appear.")
		}
		return llmtest.Echo(r)
	}
}

func scheduleRows(t *testing.T, in *apptest.Instance) (fires, runs int, statuses map[string]int) {
	t.Helper()
	ctx := context.Background()
	statuses = map[string]int{}
	rows, err := in.App.Pool().Query(ctx, `SELECT status FROM schedule_fires`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		statuses[s]++
		fires++
	}
	rows.Close()
	if err := in.App.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_runs WHERE agent_id = 'schedule'`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	return fires, runs, statuses
}

func visibleFrom(t *testing.T, in *apptest.Instance, source services.Source) []services.Message {
	t.Helper()
	page, err := in.Chat.Timeline(context.Background(), services.DefaultTimeline, 0, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	var out []services.Message
	for _, m := range page.Messages {
		if m.Source == source {
			out = append(out, m)
		}
	}
	return out
}

// TestMonitorTellsTheOwnerOnceOnEveryChannel: the owner asks in plain words
// for a page to be watched; the model schedules it; fires fetch the page in
// the schedule's own scope; when "Tickets available" appears exactly one
// notification reaches the timeline and the owner's Telegram chat, later
// fires finding the same stay quiet, the main agent sees the notification
// but never a fire's steps, and the monitor's scope holds its earlier
// findings.
func TestMonitorTellsTheOwnerOnceOnEveryChannel(t *testing.T) {
	t.Parallel()
	page, hits := ticketsPage(t, 3)
	strict := tgtest.StartStrict(t, schedTGToken)
	model := llmtest.NewServer(t)
	model.SetDefault(monitorModel(page.URL + "/tickets"))
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
		Configure: func(o *app.Config) {
			o.Fetch.Allow = []string{"127.0.0.1"}
			o.Schedule.Limits.MinInterval = time.Second
			o.Telegram.Token, o.Telegram.APIURL, o.Telegram.OwnerIDs = schedTGToken, strict.URL, []int64{ownerTG}
			o.Telegram.PollIdle = 50 * time.Millisecond
		}})
	// The owner has talked to the bot (Telegram delivers only to chats that did).
	strict.Send(tgtest.User{ID: ownerTG, FirstName: "Owner"}, "/start")
	strict.WaitMessages(ownerTG, 1, 15*time.Second)

	model.Enqueue(llmtest.Call("schedule", `{"task":"Fetch `+page.URL+`/tickets and tell me whether tickets are available","every":"1s","name":"Tickets"}`))
	if reply := ask(t, in, "Check the box office page every second and tell me when tickets appear"); !strings.Contains(reply, "I will tell you") {
		t.Fatalf("answer: %q", reply)
	}
	waitFor(t, "the notification", func() bool { return len(visibleFrom(t, in, services.SourceSchedule)) > 0 })
	// Three more fires find the same and stay quiet.
	seen := hits.Load()
	waitFor(t, "three more fires", func() bool { return hits.Load() >= seen+3 })

	notes := visibleFrom(t, in, services.SourceSchedule)
	if len(notes) != 1 || !strings.Contains(notes[0].Content, "Tickets are available now") || !strings.Contains(notes[0].Content, "**Tickets**") {
		t.Fatalf("notifications: %+v", notes)
	}
	meta, _ := services.DecodeMeta(notes[0].Metadata)
	if meta.Kind != services.MetaScheduleNotice || meta.ScheduleName != "Tickets" || meta.ScheduleID == 0 {
		t.Fatalf("notification metadata: %s", notes[0].Metadata)
	}
	var onTelegram int
	for _, m := range strict.WaitMessages(ownerTG, 2, 15*time.Second) {
		if strings.Contains(m.Text, "Tickets are available now") {
			onTelegram++
		}
	}
	if onTelegram != 1 {
		t.Fatalf("Telegram got the notification %d times: %+v", onTelegram, strict.Messages(ownerTG))
	}

	// The main agent reads the notification, never a fire's steps.
	ask(t, in, "what did the monitor find?")
	var mainReqs, fireReqs, fireWithHistory int
	for _, r := range model.Requests() {
		body := string(r.Body)
		if strings.Contains(body, fireMarker) {
			fireReqs++
			// A later fire reads what the earlier fires did.
			if strings.Count(body, fireMarker) > 1 && strings.Contains(body, "No tickets yet") {
				fireWithHistory++
			}
			continue
		}
		mainReqs++
		for _, leak := range []string{"No tickets yet", "NOTHING_NEW", "Box office"} {
			if strings.Contains(body, leak) {
				t.Fatalf("a main prompt carries a fire's step (%q): %.600s", leak, body)
			}
		}
	}
	last := model.Requests()[model.RequestCount()-1]
	if !strings.Contains(string(last.Body), "Tickets are available now") {
		t.Fatalf("the main agent does not see the notification: %.600s", last.Body)
	}
	if mainReqs < 3 || fireReqs < 8 || fireWithHistory == 0 {
		t.Fatalf("main requests %d, fire requests %d, fires reading earlier fires %d", mainReqs, fireReqs, fireWithHistory)
	}

	// Every fire is one run; the scope's rows are hidden.
	fires, runs, statuses := scheduleRows(t, in)
	if fires != runs || statuses["ok"] < 4 {
		t.Fatalf("fires %d, runs %d, statuses %v", fires, runs, statuses)
	}
	var visible int
	if err := in.App.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM chat_messages WHERE context_scope LIKE 'sched:%' AND visible = 1`).Scan(&visible); err != nil {
		t.Fatal(err)
	}
	if visible != 0 {
		t.Fatalf("%d rows of the schedule's scope are visible", visible)
	}
}

// apiCall sends a JSON request with the owner's token and decodes the answer.
func apiCall(t *testing.T, in *apptest.Instance, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, in.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+in.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// TestReminderFiresOnceInTheOwnersZone: a one-shot reminder created over
// the API with a local time in its zone fires once at that instant, tells
// the owner, and is done; the API names what is wrong with bad requests and
// refuses a stale version.
func TestReminderFiresOnceInTheOwnersZone(t *testing.T) {
	t.Parallel()
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), fireMarker) {
			return llmtest.Text("Time to call Anna.")
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) { o.Schedule.Location = tokyo }})

	type errBody struct{ Error string }
	for _, c := range []struct{ body, want string }{
		{`{"task":"x","at":"2020-01-01T09:00"}`, "is in the past"},
		{`{"task":"x","every":"10s"}`, "below the minimum interval of 1m0s"},
		{`{"task":"x","cron":"0 25 * * *"}`, `cron "0 25 * * *"`},
		{`{"task":"x","every":"1h","timezone":"Mars/Base"}`, `unknown time zone "Mars/Base"`},
		{`{"task":"x","every":"1h","cron":"0 9 * * *"}`, "give one of at, every and cron"},
		{`{"task":"","every":"1h"}`, "task is empty"},
		{`{"task":"x"}`, "say when"},
		{`{"task":"x","every":"1h","notify":"sometimes"}`, `notify "sometimes"`},
		{`{"task":"x","every":"1h","colour":"red"}`, `unknown field "colour"`},
	} {
		var e errBody
		if code := apiCall(t, in, "POST", "/api/schedules", c.body, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, c.want) {
			t.Errorf("POST %s: %d %q, want 400 naming %q", c.body, code, e.Error, c.want)
		}
	}

	due := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	var sc services.Schedule
	body := fmt.Sprintf(`{"name":"Call Anna","task":"Remind me to call Anna","at":%q}`, due.In(tokyo).Format("2006-01-02T15:04:05"))
	if code := apiCall(t, in, "POST", "/api/schedules", body, &sc); code != http.StatusCreated {
		t.Fatalf("POST: %d", code)
	}
	if sc.State != services.ScheduleActive || sc.NextFireAt == nil || !sc.NextFireAt.Equal(due) || sc.Timezone != "Asia/Tokyo" || sc.Notify != services.NotifyAlways {
		t.Fatalf("created: %+v (want next fire %s)", sc, due)
	}
	// A stale version is refused; no version is refused.
	var e errBody
	if code := apiCall(t, in, "PATCH", fmt.Sprintf("/api/schedules/%d", sc.ID), `{"version":99,"name":"x"}`, &e); code != http.StatusConflict || !strings.Contains(e.Error, "changed meanwhile") {
		t.Fatalf("stale PATCH: %d %q", code, e.Error)
	}
	if code := apiCall(t, in, "PATCH", fmt.Sprintf("/api/schedules/%d", sc.ID), `{"name":"x"}`, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "version is required") {
		t.Fatalf("PATCH without version: %d %q", code, e.Error)
	}

	waitFor(t, "the reminder", func() bool { return len(visibleFrom(t, in, services.SourceSchedule)) > 0 })
	var list struct{ Schedules []services.ScheduleWithFires }
	waitFor(t, "the schedule to be done", func() bool {
		apiCall(t, in, "GET", "/api/schedules", "", &list)
		return len(list.Schedules) == 1 && list.Schedules[0].State == services.ScheduleDone
	})
	got := list.Schedules[0]
	if len(got.Fires) != 1 || !got.Fires[0].FireAt.Equal(due) || !got.Fires[0].Notified || got.NextFireAt != nil {
		t.Fatalf("done schedule: %+v", got)
	}
	if time.Since(due) < 0 {
		t.Fatal("fired before its time")
	}
	time.Sleep(1500 * time.Millisecond) // why kept: asserts the real scheduler (PostgreSQL, River) does not fire a done schedule again over several passes; no event marks a pass that skipped it, and a DB-backed app cannot run in a synctest bubble
	if notes := visibleFrom(t, in, services.SourceSchedule); len(notes) != 1 || !strings.Contains(notes[0].Content, "Time to call Anna.") {
		t.Fatalf("notifications: %+v", notes)
	}
	// Deleted: gone from the list and the API.
	if code := apiCall(t, in, "DELETE", fmt.Sprintf("/api/schedules/%d", sc.ID), "", nil); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	if code := apiCall(t, in, "GET", fmt.Sprintf("/api/schedules/%d", sc.ID), "", nil); code != http.StatusNotFound {
		t.Fatalf("GET deleted: %d", code)
	}
}

// TestFailingScheduleIsPausedAndTheOwnerToldOnce: fires whose model call
// fails are recorded on the schedule; after SCHEDULE_MAX_FAILURES in a row
// the schedule pauses and the owner is told why, once; /schedules shows it
// and /schedules resume turns it back on.
func TestFailingScheduleIsPausedAndTheOwnerToldOnce(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	var broken atomic.Bool
	broken.Store(true)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), fireMarker) && broken.Load() {
			return llmtest.Status(http.StatusBadRequest, "")
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) {
			o.Schedule.Limits.MinInterval, o.Schedule.Limits.MaxFailures = time.Second, 2
		}})
	var sc services.Schedule
	if code := apiCall(t, in, "POST", "/api/schedules", `{"name":"Flaky","task":"check","every":"1s"}`, &sc); code != http.StatusCreated {
		t.Fatalf("POST: %d", code)
	}
	waitFor(t, "the pause", func() bool {
		got, err := in.Store.GetSchedule(context.Background(), sc.ID)
		return err == nil && got.State == services.SchedulePaused
	})
	got, _ := in.Store.GetSchedule(context.Background(), sc.ID)
	if got.Failures != 2 || got.LastStatus != "error" || !strings.Contains(got.StateReason, "paused after 2 failed runs") || got.NextFireAt != nil {
		t.Fatalf("paused schedule: %+v", got)
	}
	time.Sleep(2 * time.Second) // why kept: asserts the real scheduler does not fire a paused 1 s schedule over two intervals; no event marks a pass that skipped it, and a DB-backed app cannot run in a synctest bubble
	fires, _ := in.Store.ListFires(context.Background(), sc.ID, 10)
	notes := visibleFrom(t, in, services.SourceSchedule)
	if len(fires) != 2 || len(notes) != 1 || !strings.Contains(notes[0].Content, `"Flaky" is paused`) || !strings.Contains(notes[0].Content, "/schedules resume") {
		t.Fatalf("fires %+v, notices %+v", fires, notes)
	}

	if reply := ask(t, in, "/schedules"); !strings.Contains(reply, "Flaky") || !strings.Contains(reply, "paused") || !strings.Contains(reply, "failed runs") {
		t.Fatalf("/schedules: %q", reply)
	}
	if reply := ask(t, in, "/status"); !strings.Contains(reply, "Schedules: 0 active of 1") {
		t.Fatalf("/status: %q", reply)
	}
	broken.Store(false)
	if reply := ask(t, in, fmt.Sprintf("/schedules resume %d", sc.ID)); !strings.Contains(reply, "Resumed schedule") || !strings.Contains(reply, "next fire") {
		t.Fatalf("resume: %q", reply)
	}
	waitFor(t, "a fire after resuming", func() bool {
		fires, _ := in.Store.ListFires(context.Background(), sc.ID, 10)
		return len(fires) == 3 && fires[0].Status == services.FireOK
	})
	if reply := ask(t, in, fmt.Sprintf("/schedules delete %d", sc.ID)); !strings.Contains(reply, "Deleted schedule") {
		t.Fatalf("delete: %q", reply)
	}
	if reply := ask(t, in, "/schedules delete 999"); !strings.Contains(reply, "no schedule #999") {
		t.Fatalf("delete unknown: %q", reply)
	}
}

// TestFireRunsSingleSpaceWithScopedReadsOff: with the scoped read path off
// (legacy 0/0) a fire's prompt is the main conversation with the task
// appended, and nothing of it is stored as a row but its notification.
func TestFireRunsSingleSpaceWithScopedReadsOff(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.LastMessage, fireMarker) {
			return llmtest.Text("Water the plants.")
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) { o.Schedule.Limits.MinInterval = time.Second }})
	ask(t, in, "the plants are on the balcony")
	if code := apiCall(t, in, "POST", "/api/schedules", `{"name":"Plants","task":"remind me to water the plants","every":"1s","notify":"always"}`, nil); code != http.StatusCreated {
		t.Fatalf("POST: %d", code)
	}
	waitFor(t, "the reminder", func() bool { return len(visibleFrom(t, in, services.SourceSchedule)) > 0 })
	var fire llmtest.Request
	for _, r := range model.Requests() {
		if strings.Contains(r.LastMessage, fireMarker) {
			fire = r
			break
		}
	}
	if !strings.Contains(string(fire.Body), "the plants are on the balcony") {
		t.Fatalf("the fire does not read the main conversation: %.800s", fire.Body)
	}
	// The task comes as the current input, dated, from a schedule.
	if !strings.HasPrefix(fire.LastHeader, "[Current date and time: ") || !strings.Contains(fire.LastHeader, "This message came through a schedule") {
		t.Fatalf("the fire's input header: %q", fire.LastHeader)
	}
	var hidden int
	if err := in.App.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM chat_messages WHERE visible = 0 OR context_scope LIKE 'sched:%' OR source = 'schedule' AND visible = 0`).Scan(&hidden); err != nil || hidden != 0 {
		t.Fatalf("%d rows stored for a single-space fire (%v)", hidden, err)
	}
	var scope string
	if err := in.App.Pool().QueryRow(context.Background(), `SELECT context_scope FROM agent_runs WHERE agent_id = 'schedule' LIMIT 1`).Scan(&scope); err != nil || scope != "main" {
		t.Fatalf("the fire's run is in scope %q (%v)", scope, err)
	}
}

// TestScheduleScopeHasItsOwnSummaryCursor: when a fire's prompt nears the
// window, the schedule's scope is compacted under its own cursor (main's
// and global's are untouched), and later fires read fewer whole turns.
func TestScheduleScopeHasItsOwnSummaryCursor(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), fireMarker) {
			return llmtest.Reply{Text: "Checked: no tickets yet.", Usage: llmtest.Usage{PromptTokens: 15000, CompletionTokens: 10}}
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) {
			o.Schedule.Limits.MinInterval = time.Second
			o.Context.Compaction.KeepTurns = 1
		}})
	var sc services.Schedule
	if code := apiCall(t, in, "POST", "/api/schedules", `{"name":"Watch","task":"check the page","every":"1s"}`, &sc); code != http.StatusCreated {
		t.Fatalf("POST: %d", code)
	}
	scope := services.ScheduleScope(sc.ID)
	waitFor(t, "the schedule's cursor", func() bool {
		sum, err := in.Store.GetSummary(context.Background(), services.DefaultTimeline, scope)
		return err == nil && sum.UntilMessageID > 0
	})
	for _, other := range []string{services.MainScope, services.GlobalSummaryScope} {
		if sum, err := in.Store.GetSummary(context.Background(), services.DefaultTimeline, other); err == nil && sum.UntilMessageID > 0 {
			t.Fatalf("the %s cursor moved: %+v", other, sum)
		}
	}
	// A fire after the compaction reads one whole earlier turn, not all.
	before := model.RequestCount()
	waitFor(t, "a fire after the compaction", func() bool { return model.RequestCount() > before+1 })
	var last llmtest.Request
	for _, r := range model.Requests() {
		if strings.Contains(string(r.Body), fireMarker) {
			last = r
		}
	}
	fires, _ := in.Store.ListFires(context.Background(), sc.ID, 100)
	if n := strings.Count(string(last.Body), fireMarker); n >= len(fires) || n > 3 {
		t.Fatalf("a fire after compaction reads %d fires' inputs of %d", n, len(fires))
	}
}

// TestReminderWithTheOfflineModel: with no model configured a reminder
// still reminds (its task, and why nothing more), and the offline model's
// "configure a model" text is not posted as if it were the reminder.
func TestReminderWithTheOfflineModel(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, apptest.Options{Flags: services.Flags{ScopedWrite: true, ScopedRead: true}})
	if code := apiCall(t, in, "POST", "/api/schedules", `{"name":"Stretch","task":"stand up and stretch","at":"in 1s"}`, nil); code != http.StatusCreated {
		t.Fatalf("POST: %d", code)
	}
	waitFor(t, "the reminder", func() bool { return len(visibleFrom(t, in, services.SourceSchedule)) > 0 })
	got := visibleFrom(t, in, services.SourceSchedule)[0].Content
	if !strings.Contains(got, "Reminder: stand up and stretch") || !strings.Contains(got, "no language model is configured") || strings.Contains(got, "LLM_BASE_URL") {
		t.Fatalf("reminder: %q", got)
	}
}
