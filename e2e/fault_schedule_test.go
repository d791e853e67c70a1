package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

type fireRow struct {
	ID     int64
	At     time.Time
	Status string
	RunID  int64
	Runs   int
}

func scheduleFires(t *testing.T, pool *pgxpool.Pool) []fireRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT f.id, f.fire_at, f.status, COALESCE(f.run_id, 0),
			(SELECT count(*) FROM agent_runs r WHERE r.id = f.run_id)
		FROM schedule_fires f ORDER BY f.fire_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fireRow
	for rows.Next() {
		var f fireRow
		if err := rows.Scan(&f.ID, &f.At, &f.Status, &f.RunID, &f.Runs); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func countStatus(fires []fireRow, status string) int {
	n := 0
	for _, f := range fires {
		if f.Status == status {
			n++
		}
	}
	return n
}

// TestFaultKill9DuringAndBetweenFires runs a schedule every 2 s in real
// processes: kills the instance with SIGKILL during a fire, keeps it down
// for several intervals, then starts two instances on the database, and
// later kills one of them between fires. Afterwards: the fire cut off is
// closed as interrupted and never run again, the fires missed while down
// are caught up once (not one per interval), every fire ran once (one run,
// one model call) although two instances worked the queue, and no fire
// overlapped the one before it.
func TestFaultKill9DuringAndBetweenFires(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	pool := dbtest.PoolFor(t, db)
	model := llmtest.NewServer(t)
	var slow atomic.Bool
	var fireCalls atomic.Int64
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if !strings.Contains(string(r.Body), "Scheduled task") {
			return llmtest.Echo(r)
		}
		fireCalls.Add(1)
		if slow.Load() {
			return llmtest.Reply{Text: "an answer cut off by the crash", Delay: time.Minute}
		}
		return llmtest.Reply{Text: "NOTHING_NEW", Delay: 300 * time.Millisecond}
	})
	const token = "fault-sched-token-0123456789"
	env := []string{"WEB_AUTH_TOKEN=" + token, "LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-fault-test", "SCHEDULE_MIN_INTERVAL=1s",
		"AGENT_CONTEXT_SCOPED_WRITE=1", "AGENT_CONTEXT_SCOPED_READ=1"}

	a := startProc(t, bin, db, env...)
	req, _ := http.NewRequest("POST", a.URL+"/api/schedules", strings.NewReader(`{"task":"check the page","every":"2s","notify":"on_finding"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create schedule: %v %v", resp, err)
	}
	resp.Body.Close()
	waitLong(t, "two fires", func() bool { return countStatus(scheduleFires(t, pool), "ok") >= 2 })

	// Kill -9 during a fire.
	slow.Store(true)
	before := fireCalls.Load()
	waitLong(t, "a fire to call the model", func() bool { return fireCalls.Load() > before })
	a.kill9()
	killedAt := time.Now()
	slow.Store(false)
	time.Sleep(7 * time.Second) // why kept: the scenario is downtime itself: three 2 s intervals pass with no instance alive, so the restart must catch up once; real processes and PostgreSQL's clock, not a bubble

	restart := time.Now()
	b := startProc(t, bin, db, env...)
	c := startProc(t, bin, db, env...)
	waitLong(t, "the cut-off fire closed", func() bool { return countStatus(scheduleFires(t, pool), "interrupted") == 1 })
	waitLong(t, "two fires after the restart", func() bool {
		n := 0
		for _, f := range scheduleFires(t, pool) {
			if f.At.After(restart) && f.Status == "ok" {
				n++
			}
		}
		return n >= 2
	})

	// Kill -9 between fires: right after one finished.
	okNow := countStatus(scheduleFires(t, pool), "ok")
	waitLong(t, "one more fire", func() bool { return countStatus(scheduleFires(t, pool), "ok") > okNow })
	b.kill9()
	okNow = countStatus(scheduleFires(t, pool), "ok")
	waitLong(t, "two fires on the surviving instance", func() bool { return countStatus(scheduleFires(t, pool), "ok") >= okNow+2 })
	c.stop() // waits for the process to exit: nothing writes after this

	fires := scheduleFires(t, pool)
	var cut *fireRow
	caughtUp := 0
	for i, f := range fires {
		if f.Runs != 1 {
			t.Errorf("fire %d at %s has %d runs; want 1", f.ID, f.At.Format(time.RFC3339), f.Runs)
		}
		if f.Status == "interrupted" {
			cut = &fires[i]
		}
	}
	if cut == nil || !cut.At.Before(killedAt) {
		t.Fatalf("no interrupted fire before the kill: %+v", fires)
	}
	// The fires after the cut-off one and before the restart: the one that
	// was pending when the process died (its time may fall just before the
	// kill when the cut-off fire began late), caught up once, not one per
	// missed interval.
	for _, f := range fires {
		if f.At.After(cut.At) && f.At.Before(restart) {
			caughtUp++
		}
	}
	if caughtUp != 1 {
		t.Fatalf("%d fires were due while the service was down were run; want 1 (caught up once): %+v", caughtUp, fires)
	}
	// One model call per fire: none ran twice, the cut-off one included.
	if got := fireCalls.Load(); got != int64(len(fires)) {
		t.Fatalf("the model was called %d times for %d fires: %+v", got, len(fires), fires)
	}
	var overlaps, runStatus int
	if err := pool.QueryRow(context.Background(), `
		SELECT count(*) FROM (SELECT r.started_at, lag(r.finished_at) OVER (ORDER BY f.fire_at) AS prev_end
			FROM schedule_fires f JOIN agent_runs r ON r.id = f.run_id) x
		WHERE prev_end IS NOT NULL AND started_at < prev_end`).Scan(&overlaps); err != nil {
		t.Fatal(err)
	}
	if overlaps != 0 {
		t.Fatalf("%d fires started before the previous one ended", overlaps)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_runs WHERE id = $1 AND status = 'interrupted'`, cut.RunID).Scan(&runStatus); err != nil || runStatus != 1 {
		t.Fatalf("the cut-off fire's run is not interrupted (%v)", err)
	}
	var visible int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_messages WHERE source = 'schedule' AND visible = 1`).Scan(&visible); err != nil || visible != 0 {
		t.Fatalf("%d notifications for fires that found nothing (%v)", visible, err)
	}
}
