package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

var loginLinkRE = regexp.MustCompile(`/login\?token=(\S+)`)

// generatedToken reads the owner token serve printed at first start.
func generatedToken(t *testing.T, p *serveProc) string {
	t.Helper()
	m := loginLinkRE.FindStringSubmatch(p.Stdout.String())
	if m == nil {
		t.Fatalf("no login link printed:\n%s", p.Stdout.String())
	}
	return m[1]
}

// TestNoSecretsInProcessLogs runs a real serve at LOG_LEVEL=debug and does
// what an owner does — logs in with the link and the form, posts over HTTP
// and the websocket, gets answers, and a stranger guesses — then reads
// everything the process wrote to stderr: no message text, answer, login
// token, token hash, session cookie or API key is in it.
func TestNoSecretsInProcessLogs(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	const apiKey = "sk-secret-api-key-5be1d0"
	p := startProc(t, bin, db, "LOG_LEVEL=debug", "LLM_PROVIDER=openai", "LLM_BASE_URL="+model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY="+apiKey)
	token := generatedToken(t, p)
	c := newOwnerClient(p.URL, token)
	phrases := []string{"zebra-cobalt-secret-1", "walrus-ochre-secret-2", "heron-umber-secret-3"}

	// Log in with the printed link and with the form.
	resp, err := c.http.Get(p.URL + "/login?token=" + url.QueryEscape(token))
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login link: %v %v", resp, err)
	}
	resp.Body.Close()
	var cookie string
	for _, ck := range resp.Cookies() {
		if ck.Name == "sb_session" {
			cookie = ck.Value
		}
	}
	form, _ := http.NewRequest("POST", p.URL+"/login", strings.NewReader("token="+url.QueryEscape(token)))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := c.http.Do(form); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login form: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// A stranger guessing.
	if resp, err := http.Get(p.URL + "/api/timeline?x=1"); err == nil {
		resp.Body.Close()
	}

	// Post over HTTP (bearer), with the cookie, and over the websocket.
	first := c.post(phrases[0], "")
	if first.Status != 201 {
		t.Fatalf("post: %d %s", first.Status, first.Body)
	}
	req, _ := http.NewRequest("POST", p.URL+"/api/messages", strings.NewReader(`{"content":"`+phrases[1]+`"}`))
	req.Header.Set("Cookie", "sb_session="+cookie)
	req.Header.Set("Origin", p.URL)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := c.http.Do(req); err != nil || resp.StatusCode != 201 {
		t.Fatalf("cookie post: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialOwnerWS(ctx, p.URL, token, 0)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := json.Marshal(map[string]string{"type": "post", "content": phrases[2], "source": "tui"})
	if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
		t.Fatal(err)
	}
	// Every phrase is answered (the echo carries it back).
	waitFor(t, "three answers", func() bool {
		n := 0
		for _, m := range c.timeline(t) {
			if m.Role == "assistant" && strings.HasPrefix(m.Content, "echo: ") {
				n++
			}
		}
		return n == 3
	})
	conn.Close(websocket.StatusNormalClosure, "")
	p.stop()

	logs := p.Stderr.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) {
		t.Fatalf("no debug lines logged; the test proves nothing:\n%s", tail(logs, 2000))
	}
	hash := sha256.Sum256([]byte(token))
	secrets := map[string]string{"login token": token, "token hash": hex.EncodeToString(hash[:]),
		"session cookie": cookie, "API key": apiKey}
	if cookie == "" {
		t.Fatal("no session cookie from the login link")
	}
	for i, ph := range phrases {
		secrets["message "+string(rune('1'+i))] = ph
	}
	for what, s := range secrets {
		if i := strings.Index(logs, s); i >= 0 {
			t.Errorf("the %s is in the log: …%s…", what, logs[max(0, i-200):min(len(logs), i+len(s)+50)])
		}
	}
	t.Logf("%d log lines checked", strings.Count(logs, "\n"))
}

// TestLoginTokenStoredOnlyAsHash starts serve without WEB_AUTH_TOKEN, so it
// generates and prints a token, and reads every row of every table as text:
// the token is not there, only its SHA-256 is. The same after `switchboard
// token reset`.
func TestLoginTokenStoredOnlyAsHash(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	p := startProc(t, bin, db)
	token := generatedToken(t, p)
	if resp, err := newOwnerClient(p.URL, token).http.Get(p.URL + "/login?token=" + url.QueryEscape(token)); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the printed token does not log in: %v %v", resp, err)
	}
	p.stop()
	checkDump := func(token string) {
		t.Helper()
		dump := dumpSchema(t, db)
		if strings.Contains(dump, token) {
			t.Fatalf("the plaintext token is stored in the database")
		}
		var stored []byte
		if err := dbtest.PoolFor(t, db).QueryRow(context.Background(), `SELECT token_sha256 FROM owner_credentials WHERE id = 1`).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if want := sha256.Sum256([]byte(token)); string(stored) != string(want[:]) {
			t.Fatalf("owner_credentials holds %x; want the token's SHA-256", stored)
		}
	}
	checkDump(token)

	cmd := exec.Command(bin, "token", "reset")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db, "DATA_DIR="+t.TempDir(), "WEB_AUTH_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("token reset: %v\n%s", err, out)
	}
	m := loginLinkRE.FindStringSubmatch(string(out))
	if m == nil || m[1] == token {
		t.Fatalf("token reset printed no new token:\n%s", out)
	}
	checkDump(m[1])
}

// dumpSchema returns every row of every table of the database URL's
// schema, as text.
func dumpSchema(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.PoolFor(t, dbURL)
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables: %v %v", tables, err)
	}
	var sb strings.Builder
	for _, tb := range tables {
		var text string
		if err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+pgx.Identifier{tb}.Sanitize()+` t`).Scan(&text); err != nil {
			t.Fatalf("dump %s: %v", tb, err)
		}
		sb.WriteString(text)
		sb.WriteByte('\n')
	}
	return sb.String()
}
