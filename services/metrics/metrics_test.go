package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/metrics"
)

type fakeSource struct {
	calls atomic.Int32
	err   error
}

func (f *fakeSource) MetricsSnapshot(context.Context) (metrics.Snapshot, error) {
	f.calls.Add(1)
	return metrics.Snapshot{
		MessagesByChannel:   map[string]int64{"web": 3, "telegram": 2},
		QueueJobs:           []metrics.QueueJobs{{Queue: "turns", State: "available", Jobs: 4}},
		UnfinishedRuns:      map[string]int64{"queued": 1},
		OldestUnfinishedRun: 90 * time.Second,
	}, f.err
}

type fakeRuns map[int64]services.Run

func (f fakeRuns) GetRun(_ context.Context, id int64) (services.Run, error) {
	r, ok := f[id]
	if !ok {
		return services.Run{}, services.Errorf(services.ENOTFOUND, "run %d not found", id)
	}
	return r, nil
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("scrape lacks %q", l)
		}
	}
}

func TestRunObserverAndHooks(t *testing.T) {
	t.Parallel()
	start := time.Now().Add(-3 * time.Second)
	end := start.Add(2 * time.Second)
	runs := fakeRuns{
		1: {ID: 1, Status: services.RunOK, StartedAt: start, FinishedAt: &end, PromptTokenBudget: 1000,
			EstimatedPromptTokens: 800, PromptTokens: 900, CompletionTokens: 50, CachedTokens: 600},
		2: {ID: 2, ParentRunID: 1, ContextScope: "sub:researcher:2", Status: services.RunTimeout, StartedAt: start, FinishedAt: &end},
		3: {ID: 3, Status: services.RunRunning, StartedAt: start}, // left open: not counted
	}
	src := &fakeSource{}
	m := metrics.New(metrics.Options{Source: src, Runs: runs, CacheFor: time.Hour})
	ctx := context.Background()
	for _, id := range []int64{1, 2, 3} {
		m.RunStarted(ctx, services.Run{ID: id}, services.Message{})
	}
	if body := scrape(t, m); !strings.Contains(body, "\nswitchboard_runs_active 3\n") {
		t.Fatalf("active runs not 3:\n%s", body)
	}
	for _, id := range []int64{1, 2, 3} {
		m.RunFinished(ctx, services.Run{ID: id, Status: services.RunRunning}, services.Message{})
	}
	m.RunFinished(ctx, services.Run{ID: 99}, services.Message{}) // unknown: logged, not counted
	m.CompactionObserved("ok")
	m.CompactionObserved("failed")
	m.CompactionObserved("Weird Label!")
	m.TelegramSendError("429")
	m.TelegramSendErrorCode(0)
	m.ObserveRequest("GET", "/api/timeline", 200, 5*time.Millisecond)
	m.ObserveRequest("GET", "", 404, time.Millisecond)
	m.WebsocketOpened()
	m.WebsocketOpened()
	m.WebsocketOpened()
	m.WebsocketClosed()

	body := scrape(t, m)
	wantLines(t, body,
		"switchboard_runs_started_total 3",
		`switchboard_runs_finished_total{status="ok"} 1`,
		`switchboard_runs_finished_total{status="timeout"} 1`,
		`switchboard_run_duration_seconds_count{status="ok"} 1`,
		`switchboard_run_duration_seconds_sum{status="ok"} 2`,
		"switchboard_runs_active 0",
		"switchboard_prompt_tokens_total 900",
		"switchboard_completion_tokens_total 50",
		"switchboard_cached_prompt_tokens_total 600",
		"switchboard_prompt_estimated_tokens_total 800",
		`switchboard_prompt_budget_use_ratio_bucket{le="0.8"} 1`,
		`switchboard_prompt_budget_use_ratio_bucket{le="0.7"} 0`,
		`switchboard_handoffs_total{status="timeout"} 1`,
		`switchboard_compactions_total{result="ok"} 1`,
		`switchboard_compactions_total{result="failed"} 1`,
		`switchboard_compactions_total{result="other"} 1`,
		`switchboard_telegram_send_errors_total{code="429"} 1`,
		`switchboard_telegram_send_errors_total{code="network"} 1`,
		`switchboard_http_requests_total{code="200",method="GET",route="/api/timeline"} 1`,
		`switchboard_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		"switchboard_websocket_clients 2",
		`switchboard_messages_total{channel="web"} 3`,
		`switchboard_messages_total{channel="telegram"} 2`,
		`switchboard_queue_jobs{queue="turns",state="available"} 4`,
		`switchboard_runs_unfinished{status="queued"} 1`,
		"switchboard_oldest_unfinished_run_age_seconds 90",
		"switchboard_db_scrape_success 1",
	)
	if strings.Contains(body, `handoffs_total{status="ok"}`) {
		t.Error("a main run was counted as a handoff")
	}
	// The database snapshot is cached between scrapes.
	if n := src.calls.Load(); n != 1 {
		t.Errorf("source read %d times for 2 scrapes, want 1 (cached)", n)
	}
}

func TestSourceFailureIsVisible(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{Source: &fakeSource{err: errors.New("down")}, CacheFor: time.Nanosecond})
	body := scrape(t, m)
	wantLines(t, body, "switchboard_db_scrape_success 0")
	if strings.Contains(body, "switchboard_messages_total{") {
		t.Error("stale database gauges exported after a failed read")
	}
}
