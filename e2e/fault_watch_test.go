package e2e

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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// fireWatchNow makes schedule id's next fire due and waits until it has n
// finished fires.
func fireWatchNow(t *testing.T, pool *pgxpool.Pool, id int64, n int) {
	t.Helper()
	makeFireDue(t, pool, id)
	waitFires(t, pool, n)
}

// makeFireDue makes schedule id's waiting fire job available at once (the
// schedule is hourly), waiting until the job is there to change.
func makeFireDue(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	waitLong(t, "the next fire's job", func() bool {
		tag, err := pool.Exec(context.Background(), `UPDATE river_job SET state = 'available', scheduled_at = now()
			WHERE kind = 'schedule_fire' AND state = 'scheduled' AND (args->>'schedule_id')::bigint = $1`, id)
		if err != nil {
			t.Fatal(err)
		}
		return tag.RowsAffected() > 0
	})
}

// waitFires waits until n fires have ended.
func waitFires(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	waitLong(t, fmt.Sprintf("%d finished fires", n), func() bool {
		return countPool(t, pool, `SELECT count(*) FROM schedule_fires WHERE status <> 'running'`) >= n
	})
}

func countPool(t *testing.T, pool *pgxpool.Pool, q string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFaultKill9WatchFires runs a watch schedule in real processes: the
// first look calls the model once; an unchanged page calls it never, also
// after a kill -9 between fires; a kill -9 while the change's fire waits
// for the model leaves that fire interrupted and the content unjudged, so
// the next instance's fire sees the change again: one notification in
// all, and exactly one model call per fire that had a change to judge.
func TestFaultKill9WatchFires(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	pool := dbtest.PoolFor(t, db)

	var hits atomic.Int64
	var open atomic.Bool
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		state := "No tickets yet."
		if open.Load() {
			state = "Tickets available from today."
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><h1>Box office</h1><p>%s</p><footer>Updated at 12:%02d:%02d</footer></body></html>`, state, n/60, n%60)
	}))
	t.Cleanup(page.Close)

	model := llmtest.NewServer(t)
	var slow atomic.Bool
	var fireCalls atomic.Int64
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if !strings.Contains(string(r.Body), "Scheduled task") {
			return llmtest.Echo(r)
		}
		fireCalls.Add(1)
		switch {
		case slow.Load():
			return llmtest.Reply{Text: "cut off by the crash", Delay: time.Minute}
		case strings.Contains(r.LastMessage, "Tickets available"):
			return llmtest.Text(`{"news": true, "message": "Tickets are available now"}`)
		}
		return llmtest.Text(`{"news": false, "message": ""}`)
	})
	const token = "fault-watch-token-0123456789"
	env := []string{"WEB_AUTH_TOKEN=" + token, "LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-fault-test", "FETCH_ALLOW=127.0.0.1",
		"AGENT_CONTEXT_SCOPED_WRITE=1", "AGENT_CONTEXT_SCOPED_READ=1"}

	a := startProc(t, bin, db, env...)
	body := `{"name":"Tickets","task":"Tell me when tickets are available","every":"1h",
		"watch":{"url":"` + page.URL + `","ignore":["Updated at [0-9:]+"]}}`
	req, _ := http.NewRequest("POST", a.URL+"/api/schedules", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create schedule: %v %v", resp, err)
	}
	var sc struct{ ID int64 }
	_ = json.NewDecoder(resp.Body).Decode(&sc)
	resp.Body.Close()

	fireWatchNow(t, pool, sc.ID, 1) // the first look: one model call
	fireWatchNow(t, pool, sc.ID, 2) // unchanged
	a.kill9()                       // between fires
	b := startProc(t, bin, db, env...)
	fireWatchNow(t, pool, sc.ID, 3) // still unchanged after the restart
	if got := fireCalls.Load(); got != 1 {
		t.Fatalf("3 fires over an unchanged page, a kill -9 between them: %d model calls, want 1", got)
	}

	// The tickets appear; the instance dies while the model judges them.
	open.Store(true)
	slow.Store(true)
	makeFireDue(t, pool, sc.ID)
	waitLong(t, "the change's fire to call the model", func() bool { return fireCalls.Load() == 2 })
	b.kill9()
	slow.Store(false)
	startProc(t, bin, db, env...)
	waitFires(t, pool, 4)
	if n := countPool(t, pool, `SELECT count(*) FROM schedule_fires WHERE status = 'interrupted'`); n != 1 {
		t.Fatalf("%d interrupted fires, want the one cut off", n)
	}
	// The next fire sees the change again (the cut-off one judged nothing).
	fireWatchNow(t, pool, sc.ID, 5)
	fireWatchNow(t, pool, sc.ID, 6)

	var statuses []string
	rows, err := pool.Query(context.Background(), `SELECT status || CASE WHEN notified THEN '+told' ELSE '' END || '/' || model_calls FROM schedule_fires ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		statuses = append(statuses, s)
	}
	rows.Close()
	want := "ok/1 unchanged/0 unchanged/0 interrupted/0 ok+told/1 unchanged/0"
	if got := strings.Join(statuses, " "); got != want {
		t.Fatalf("fires: %s, want %s", got, want)
	}
	if got := fireCalls.Load(); got != 3 {
		t.Fatalf("model calls: %d, want 3 (first look, the cut-off judgement, the change judged again)", got)
	}
	if n := countPool(t, pool, `SELECT count(*) FROM chat_messages WHERE source = 'schedule' AND visible = 1`); n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}
	if n := countPool(t, pool, `SELECT count(*) FROM agent_runs WHERE agent_id = 'schedule'`); n != 3 {
		t.Fatalf("%d schedule runs, want 3 (unchanged fires have none)", n)
	}
}
