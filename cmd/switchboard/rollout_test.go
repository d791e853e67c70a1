package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestRolloutAsDocumented follows docs/ROLLOUT.md on a legacy database:
// migrate, dual-write, the watch queries, scoped reads, rollback. Each phase
// answers, and nothing stored before is lost.
func TestRolloutAsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ROLLOUT.md")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin := buildBinary(t)
	pool, schema := dbtest.EmptySchema(t)
	db := apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema))
	m, err := repository.NewMigrator(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'telegram', 'legacy question'), ('assistant', 'agent', 'legacy answer')`)
	dbtest.Exec(t, pool, `INSERT INTO chat_context_summaries (scope, until_message_id, summary_text) VALUES ('global', 2, 'legacy summary')`)

	// Step 1, as written.
	if !strings.Contains(string(doc), "switchboard migrate up") {
		t.Fatal("the doc no longer says how to migrate")
	}
	out, err := runBin(bin, []string{"DATABASE_URL=" + db}, "migrate", "up")
	if err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	model := llmtest.NewServer(t)
	token := "rollout-token-0123456789"
	base := []string{"WEB_AUTH_TOKEN=" + token, "LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(), "LLM_MODEL=gpt-4o-mini"}
	flagLine := regexp.MustCompile(`(?m)^(AGENT_CONTEXT_SCOPED_WRITE=\d AGENT_CONTEXT_SCOPED_READ=\d) switchboard serve$`)
	phases := flagLine.FindAllStringSubmatch(string(doc), -1)
	if len(phases) != 3 {
		t.Fatalf("the doc has %d serve lines with flags, want dual-write, scoped and rollback", len(phases))
	}
	sqlBlock := regexp.MustCompile("(?s)```sql\n(.*?)```")
	for i, ph := range phases {
		env := append(append([]string{}, base...), strings.Fields(ph[1])...)
		url, stop := startServeStoppable(t, bin, db, env...)
		question := "question in phase " + ph[1]
		postAndWait(t, url, token, question)
		if i == 0 {
			// The watch queries of step 2 run as written.
			for _, q := range sqlBlock.FindAllStringSubmatch(string(doc), -1) {
				rows, err := pool.Query(ctx, q[1])
				if err != nil {
					t.Fatalf("watch query failed: %v\n%s", err, q[1])
				}
				n := 0
				for rows.Next() {
					n++
				}
				rows.Close()
				if rows.Err() != nil || n == 0 {
					t.Fatalf("watch query returned nothing: %v\n%s", rows.Err(), q[1])
				}
			}
		}
		stop()
	}
	var legacy int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM chat_messages WHERE content IN ('legacy question', 'legacy answer') AND timeline_scope = 'global' AND context_scope = 'main'`).Scan(&legacy); err != nil || legacy != 2 {
		t.Fatalf("legacy rows after the rollout: %d %v", legacy, err)
	}
	var sum string
	if err := pool.QueryRow(ctx, `SELECT summary_text FROM chat_context_summaries WHERE scope = 'global'`).Scan(&sum); err != nil || sum != "legacy summary" {
		t.Fatalf("legacy summary: %q %v", sum, err)
	}
}

// postAndWait posts a message and waits until the agent's answer to it is stored.
func postAndWait(t *testing.T, url, token, text string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"content": text})
	req, _ := http.NewRequest("POST", url+"/api/messages", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("post %q: %v %v", text, resp, err)
	}
	var posted struct {
		Message struct{ ID int64 } `json:"message"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&posted)
	resp.Body.Close()
	answered := func() bool {
		req, _ := http.NewRequest("GET", url+"/api/timeline?limit=500", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r, err := http.DefaultClient.Do(req)
		if err == nil {
			var page struct {
				Messages []struct {
					Role     string          `json:"role"`
					Metadata json.RawMessage `json:"metadata"`
				} `json:"messages"`
			}
			_ = json.NewDecoder(r.Body).Decode(&page)
			r.Body.Close()
			for _, m := range page.Messages {
				var meta struct {
					ReplyTo int64 `json:"reply_to"`
				}
				_ = json.Unmarshal(m.Metadata, &meta)
				if m.Role == "assistant" && meta.ReplyTo == posted.Message.ID {
					return true
				}
			}
		}
		return false
	}
	if waitUntil(30*time.Second, answered) {
		return
	}
	t.Fatalf("no answer to %q", text)
}

// runBin runs the binary with extra environment and returns its output.
func runBin(bin string, env []string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// startServeStoppable starts serve on a free port; stop interrupts it (a
// graceful shutdown, as an operator restarting with new flags would) and
// waits until the port no longer answers.
func startServeStoppable(t *testing.T, bin, dbURL string, env ...string) (string, func()) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := startServeAt(t, bin, dbURL, addr, env...)
	url := "http://" + addr
	return url, func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if !pollEvery(15*time.Second, 50*time.Millisecond, func() bool {
			resp, err := http.Get(url + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err != nil
		}) {
			t.Fatal("serve did not stop")
		}
	}
}
