package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestHandoffSurvivesACrashBeforeTheParentsNextStep kills the server (-9)
// after a child run has handed off but before the parent's next model call
// answers, restarts it, and checks the handoff is stored exactly once, the
// parent run ends interrupted with one notice, and nothing is duplicated.
func TestHandoffSurvivesACrashBeforeTheParentsNextStep(t *testing.T) {
	bin := buildBinary(t)
	pool, schema := dbtest.Schema(t)
	db := apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema))
	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch {
		case strings.Contains(string(r.Body), "You are a sub-agent"):
			return llmtest.Text("child result")
		case r.LastIsToolResult:
			return llmtest.Reply{Text: "never delivered", Delay: time.Minute}
		}
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "delegate", Arguments: `{"task":"look it up"}`}}}
	})
	token := "crash-token-0123456789"
	env := []string{"WEB_AUTH_TOKEN=" + token, "LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(), "LLM_MODEL=gpt-4o-mini",
		"AGENT_CONTEXT_SCOPED_WRITE=1", "AGENT_CONTEXT_SCOPED_READ=1", "AGENT_SUBAGENTS=1", "LLM_MAX_RETRIES=0"}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	first := startServeAt(t, bin, db, addr, env...)
	url := "http://" + addr
	ctx := context.Background()
	go postAndWaitQuiet(url, token, "please research")
	count := func(q string) int {
		var n int
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if !waitUntil(20*time.Second, func() bool {
		return count(`SELECT count(*) FROM chat_messages WHERE dedupe_key LIKE 'handoff:%'`) > 0
	}) {
		t.Fatal("the child never handed off")
	}
	// The parent is now waiting on its next model call (the one with the
	// child's result, which the model holds for a minute).
	if !waitUntil(20*time.Second, func() bool {
		for _, r := range model.Requests() {
			if r.LastIsToolResult && !strings.Contains(string(r.Body), "You are a sub-agent") {
				return true
			}
		}
		return false
	}) {
		t.Fatal("the parent never made its next model call")
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	startServeAt(t, bin, db, addr, env...)
	if !waitUntil(30*time.Second, func() bool {
		return count(`SELECT count(*) FROM agent_runs WHERE parent_run_id IS NULL AND status = 'interrupted'`) > 0
	}) {
		t.Fatal("the parent run was never closed after the restart")
	}
	if n := count(`SELECT count(*) FROM chat_messages WHERE dedupe_key LIKE 'handoff:%'`); n != 1 {
		t.Fatalf("%d handoff rows, want exactly 1", n)
	}
	if n := count(`SELECT count(*) FROM chat_messages WHERE visible = 1 AND metadata->>'kind' = 'handoff'`); n != 1 {
		t.Fatalf("%d handoff markers, want 1", n)
	}
	if n := count(`SELECT count(*) FROM agent_run_steps WHERE kind = 'handoff'`); n != 1 {
		t.Fatalf("%d handoff steps, want 1", n)
	}
	if n := count(`SELECT count(*) FROM agent_runs WHERE parent_run_id IS NOT NULL AND status = 'ok'`); n != 1 {
		t.Fatalf("child runs ok: %d, want 1", n)
	}
	if n := count(`SELECT count(*) FROM chat_messages WHERE visible = 1 AND content LIKE '%interrupted%'`); n != 1 {
		t.Fatalf("%d interrupted notices, want 1", n)
	}
	if n := count(`SELECT count(*) FROM chat_messages WHERE content = 'never delivered'`); n != 0 {
		t.Fatal("an answer was stored for a run that died")
	}
}

// postAndWaitQuiet posts without a test to fail (the server dies meanwhile).
func postAndWaitQuiet(url, token, text string) {
	req, _ := http.NewRequest("POST", url+"/api/messages", strings.NewReader(fmt.Sprintf(`{"content":%q}`, text)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req); err == nil {
		resp.Body.Close()
	}
}
