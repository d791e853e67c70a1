package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestMetricsAfterScriptedSession posts messages through the chat service
// and the API, keeps a websocket open, runs a main run and a sub-agent run
// through the RunObserver, reports a compaction and a Telegram send error,
// then scrapes /metrics and finds each counted.
func TestMetricsAfterScriptedSession(t *testing.T) {
	t.Parallel()
	in := newOpsInstance(t, false)
	ctx := context.Background()
	for _, src := range []services.Source{"telegram", "telegram", "tui"} {
		if _, _, err := in.Chat.Post(ctx, services.PostParams{TimelineScope: "global", Source: src, Content: "hello from " + string(src)}); err != nil {
			t.Fatal(err)
		}
	}
	trigger := postAs(t, in.URL, "web", "hello from the web")
	ws := dialWS(t, in.URL, "")
	ws.untilReady()

	// A main run and its sub-agent, as the runtime drives its observers.
	run, err := in.Store.CreateRun(ctx, services.NewRun{TimelineScope: "global", TriggerMessageID: trigger.ID, Source: "web", Status: services.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	child, err := in.Store.CreateRun(ctx, services.NewRun{TimelineScope: "global", ContextScope: "sub:researcher:x", ParentRunID: run.ID, Source: "agent", Status: services.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	msg := services.Message{ID: trigger.ID, TimelineScope: "global", Source: "web"}
	in.Meter.RunStarted(ctx, run, msg)
	in.Meter.RunStarted(ctx, child, msg)
	if _, err := in.Store.FinishRun(ctx, child.ID, services.RunFinish{Status: services.RunOK, PromptTokens: 100}); err != nil {
		t.Fatal(err)
	}
	in.Meter.RunFinished(ctx, child, msg)
	if _, err := in.Store.FinishRun(ctx, run.ID, services.RunFinish{Status: services.RunOK, PromptTokenBudget: 1000,
		EstimatedPromptTokens: 500, PromptTokens: 520, CompletionTokens: 40, CachedTokens: 300}); err != nil {
		t.Fatal(err)
	}
	in.Meter.RunFinished(ctx, run, msg)
	in.Meter.CompactionObserved("ok")
	in.Meter.TelegramSendError("403")
	// A run still queued, seen by every instance through the database.
	if _, err := in.Store.CreateRun(ctx, services.NewRun{TimelineScope: "global", Source: "web"}); err != nil {
		t.Fatal(err)
	}

	resp, body := do(t, "GET", in.URL+"/metrics", testMetricsToken, "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`switchboard_messages_total{channel="telegram"} 2`,
		`switchboard_messages_total{channel="tui"} 1`,
		`switchboard_messages_total{channel="web"} 1`,
		`switchboard_runs_finished_total{status="ok"} 2`,
		`switchboard_run_duration_seconds_count{status="ok"} 2`,
		`switchboard_handoffs_total{status="ok"} 1`,
		`switchboard_prompt_tokens_total 620`,
		`switchboard_cached_prompt_tokens_total 300`,
		`switchboard_prompt_budget_use_ratio_count 1`,
		`switchboard_compactions_total{result="ok"} 1`,
		`switchboard_telegram_send_errors_total{code="403"} 1`,
		`switchboard_websocket_clients 1`,
		`switchboard_runs_active 0`,
		`switchboard_runs_unfinished{status="queued"} 1`,
		`switchboard_http_requests_total{code="201",method="POST",route="/api/messages"} 1`,
		`switchboard_db_scrape_success 1`,
	} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}

	// Who may scrape: the owner (bearer or session) and the scrape token.
	if resp, _ := do(t, "GET", in.URL+"/metrics", testToken, ""); resp.StatusCode != 200 {
		t.Errorf("owner bearer: %d", resp.StatusCode)
	}
	for name, hdr := range map[string][]string{
		"none":           nil,
		"wrong bearer":   {"Authorization", "Bearer not-the-scrape-token-0000"},
		"token as basic": {"Authorization", "Basic " + testMetricsToken},
	} {
		resp, body := do(t, "GET", in.URL+"/metrics", "", "", hdr...)
		if resp.StatusCode != 401 || strings.TrimSpace(body) != `{"error":"unauthorized"}` {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
}
