package web_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/wire"
)

// previewJSON is what a test reads of GET /api/context/preview.
type previewJSON struct {
	Layers []struct {
		Layer   string `json:"layer"`
		Tokens  int    `json:"tokens"`
		Budget  int    `json:"budget"`
		Trimmed int    `json:"trimmed"`
		Reason  string `json:"reason"`
		Text    string `json:"text"`
	} `json:"layers"`
	Sources []struct {
		Layer    string `json:"layer"`
		Source   string `json:"source"`
		Tokens   int    `json:"tokens"`
		Included bool   `json:"included"`
		Reason   string `json:"reason"`
	} `json:"sources"`
	Warnings []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"warnings"`
	TotalTokens int `json:"total_tokens"`
	Request     struct {
		System   string `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Tools []string `json:"tools"`
	} `json:"request"`
}

func (p previewJSON) layer(name string) (text string, tokens int) {
	for _, l := range p.Layers {
		if l.Layer == name {
			return l.Text, l.Tokens
		}
	}
	return "", 0
}

// ctxInstance is a whole server with the fake model whose owner's
// workspace is dir.
func ctxInstance(t *testing.T) (url string, model *llmtest.Server, dir string) {
	t.Helper()
	pool, _ := dbtest.Schema(t)
	model = llmtest.NewServer(t)
	base := t.TempDir()
	in := apptest.Start(t, apptest.Options{DatabaseURL: pool.Config().ConnString(), Model: model, Token: testToken,
		Configure: func(o *app.Config) { o.WorkspaceDir = base }})
	dir = filepath.Join(base, services.DefaultTimeline)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return in.URL, model, dir
}

func getPreview(t *testing.T, url string) previewJSON {
	t.Helper()
	r, body := do(t, "GET", url+"/api/context/preview", testToken, "")
	if r.StatusCode != 200 {
		t.Fatalf("preview: %d %s", r.StatusCode, body)
	}
	var p previewJSON
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("preview: %v\n%s", err, body)
	}
	return p
}

// commandReply posts a chat command and waits for the system's answer to it.
func commandReply(t *testing.T, url, command string) string {
	t.Helper()
	m := post(t, url, command)
	var reply string
	if poll(15*time.Second, func() bool {
		_, body := do(t, "GET", fmt.Sprintf("%s/api/timeline?after=%d&limit=50", url, m.ID), testToken, "")
		var page wire.Page
		_ = json.Unmarshal([]byte(body), &page)
		for _, msg := range page.Messages {
			if msg.ReplyTo == m.ID && msg.Source == string(services.SourceSystem) {
				reply = msg.Content
				return true
			}
		}
		return false
	}) {
		return reply
	}
	t.Fatalf("no reply to %q", command)
	return ""
}

// waitAnswer waits for the model's answer to message id.
func waitAnswer(t *testing.T, url string, id int64) string {
	t.Helper()
	var reply string
	if poll(15*time.Second, func() bool {
		_, body := do(t, "GET", fmt.Sprintf("%s/api/timeline?after=%d&limit=50", url, id), testToken, "")
		var page wire.Page
		_ = json.Unmarshal([]byte(body), &page)
		for _, msg := range page.Messages {
			if msg.ReplyTo == id && msg.Role == string(services.RoleAssistant) {
				reply = msg.Content
				return true
			}
		}
		return false
	}) {
		return reply
	}
	t.Fatalf("no answer to message %d", id)
	return ""
}

const notesMD = "# Goals\n\n## This week\n\nShip the pinned-section feature by Friday.\n\n## Later\n\nRewrite the scheduler someday.\n"

// TestContextPreviewShowsTheNextPromptWithoutTheModel: GET
// /api/context/preview and /context full show the next prompt layer by
// layer (text, tokens per layer and source, warnings) and no model is
// called for either.
func TestContextPreviewShowsTheNextPromptWithoutTheModel(t *testing.T) {
	t.Parallel()
	url, model, _ := ctxInstance(t)
	if r, body := do(t, "POST", url+"/api/rules", testToken, `{"text":"Answer in French."}`); r.StatusCode != 201 {
		t.Fatalf("rule: %d %s", r.StatusCode, body)
	}
	m := post(t, url, "first question")
	waitAnswer(t, url, m.ID)
	calls := model.RequestCount()

	p := getPreview(t, url)
	if rules, tokens := p.layer("rules"); !strings.Contains(rules, "Answer in French.") || tokens == 0 {
		t.Fatalf("rules layer: %d tokens, %q", tokens, rules)
	}
	if hist, tokens := p.layer("history"); !strings.Contains(hist, "first question") || !strings.Contains(hist, "echo: first question") || tokens == 0 {
		t.Fatalf("history layer: %d tokens, %q", tokens, hist)
	}
	if !strings.Contains(p.Request.System, "Answer in French.") || len(p.Request.Tools) == 0 || len(p.Request.Messages) < 2 {
		t.Fatalf("request: %+v", p.Request)
	}
	sum, rule, tool := 0, false, false
	for _, l := range p.Layers {
		sum += l.Tokens
	}
	for _, s := range p.Sources {
		rule = rule || s.Layer == "rules" && strings.HasPrefix(s.Source, "rule #") && s.Included && s.Tokens > 0
		tool = tool || s.Layer == "system" && strings.HasPrefix(s.Source, "tool ") && s.Tokens > 0
	}
	if sum != p.TotalTokens || !rule || !tool {
		t.Fatalf("tokens: layers sum %d, total %d; rule source %v, tool source %v; %+v", sum, p.TotalTokens, rule, tool, p.Sources)
	}

	full := commandReply(t, url, "/context full")
	for _, want := range []string{"Nothing was sent to the model.", "== rules:", "Answer in French.", "== history:", "first question"} {
		if !strings.Contains(full, want) {
			t.Fatalf("/context full lacks %q:\n%s", want, full)
		}
	}
	if n := model.RequestCount(); n != calls {
		t.Fatalf("the preview called the model: %d requests, %d before", n, calls)
	}
}

// TestContextManifestPinsASection: a section pinned through the API is in
// the preview and in the next model request; a stale update is refused
// with CONTEXT_MANIFEST_CONFLICT and changes nothing; bad manifests are
// refused naming the problem; a pin whose file went away is skipped with a
// named warning and the turn still answers; /pin, /pins and /unpin edit
// the same manifest.
func TestContextManifestPinsASection(t *testing.T) {
	t.Parallel()
	url, model, dir := ctxInstance(t)
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte(notesMD), 0o600); err != nil {
		t.Fatal(err)
	}
	r, body := do(t, "GET", url+"/api/context/manifest", testToken, "")
	if r.StatusCode != 200 || strings.TrimSpace(body) != `{"version":0,"pins":[]}` {
		t.Fatalf("empty manifest: %d %s", r.StatusCode, body)
	}
	r, body = do(t, "PUT", url+"/api/context/manifest", testToken, `{"version":0,"pins":[{"path":"notes.md","block":"Goals/This week"}]}`)
	if r.StatusCode != 200 || !strings.Contains(body, `"version":1`) {
		t.Fatalf("pin: %d %s", r.StatusCode, body)
	}
	// A stale version, bad JSON, an unknown path or section, an unknown field.
	for _, c := range []struct {
		body, status, want string
	}{
		{`{"version":0,"pins":[]}`, "409", "CONTEXT_MANIFEST_CONFLICT"},
		{`{"version":1,"pins":[{"path":"missing.md"}]}`, "400", "file missing.md not found"},
		{`{"version":1,"pins":[{"path":"notes.md","block":"Nowhere"}]}`, "400", "Nowhere"},
		{`{"version":1,"pins":[{"path":"notes.md","lines":[9,3]}]}`, "400", "lines"},
		{`{"version":1,"pins":[{"path":"../etc/passwd"}]}`, "400", "leaves the workspace"},
		{`{"version":1,"pins":[{"file":"notes.md"}]}`, "400", "file"},
		{`{"pins":[]}`, "400", "version"},
		{`{"version":1,"pins":[`, "400", "JSON"},
	} {
		r, body := do(t, "PUT", url+"/api/context/manifest", testToken, c.body)
		if fmt.Sprint(r.StatusCode) != c.status || !strings.Contains(body, c.want) {
			t.Errorf("PUT %s: %d %s; want %s naming %q", c.body, r.StatusCode, body, c.status, c.want)
		}
	}
	r, body = do(t, "GET", url+"/api/context/manifest", testToken, "")
	var man services.ContextManifest
	_ = json.Unmarshal([]byte(body), &man)
	if r.StatusCode != 200 || man.Version != 1 || len(man.Pins) != 1 || man.Pins[0].Block != "Goals/This week" {
		t.Fatalf("after the refused updates: %d %s", r.StatusCode, body)
	}
	data, err := os.ReadFile(filepath.Join(dir, services.ContextManifestFile))
	if err != nil || !strings.Contains(string(data), `"block": "Goals/This week"`) {
		t.Fatalf("context.json: %v %s", err, data)
	}

	// The preview shows the pinned section, and only it, in the retrieved layer.
	calls := model.RequestCount()
	p := getPreview(t, url)
	text, tokens := p.layer("retrieved")
	if !strings.Contains(text, "Ship the pinned-section feature by Friday.") || strings.Contains(text, "Rewrite the scheduler") || tokens == 0 {
		t.Fatalf("retrieved layer: %d tokens, %q", tokens, text)
	}
	pinned := false
	for _, s := range p.Sources {
		pinned = pinned || s.Layer == "retrieved" && strings.HasPrefix(s.Source, "pin: notes.md#Goals/This week") && s.Included && s.Tokens > 0
	}
	if !pinned {
		t.Fatalf("no included pin source: %+v", p.Sources)
	}
	if model.RequestCount() != calls {
		t.Fatal("the preview called the model")
	}
	// The next model request carries it.
	m := post(t, url, "what is due this week?")
	waitAnswer(t, url, m.ID)
	reqs := model.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), "Ship the pinned-section feature by Friday.") {
		t.Fatalf("the model request lacks the pinned section: %s", last.Body)
	}

	// Chat commands edit the same manifest.
	if got := commandReply(t, url, "/pin notes.md:1-3"); !strings.Contains(got, "Pinned notes.md:1-3") || !strings.Contains(got, "version 2") {
		t.Fatalf("/pin: %s", got)
	}
	if got := commandReply(t, url, "/pin gone.md"); !strings.Contains(got, "gone.md") || !strings.Contains(got, "failed") {
		t.Fatalf("/pin of a missing file: %s", got)
	}
	if got := commandReply(t, url, "/pins"); !strings.Contains(got, "- notes.md#Goals/This week") || !strings.Contains(got, "- notes.md:1-3") {
		t.Fatalf("/pins: %s", got)
	}
	if got := commandReply(t, url, "/unpin notes.md:1-3"); !strings.Contains(got, "Unpinned notes.md:1-3") {
		t.Fatalf("/unpin: %s", got)
	}

	// The pinned file goes away: the pin is skipped with a named warning
	// and the turn still answers.
	if err := os.Remove(filepath.Join(dir, "notes.md")); err != nil {
		t.Fatal(err)
	}
	p = getPreview(t, url)
	warned := false
	for _, w := range p.Warnings {
		warned = warned || w.Code == "CONTEXT_PIN_MISSING" && strings.Contains(w.Message, "pin notes.md#Goals/This week skipped: file notes.md not found")
	}
	if !warned {
		t.Fatalf("no CONTEXT_PIN_MISSING naming the pin: %+v", p.Warnings)
	}
	if full := commandReply(t, url, "/context full"); !strings.Contains(full, "CONTEXT_PIN_MISSING") {
		t.Fatalf("/context full does not name the missing pin:\n%s", full)
	}
	if got := commandReply(t, url, "/pins"); !strings.Contains(got, "Warning CONTEXT_PIN_MISSING: pin notes.md#Goals/This week skipped") {
		t.Fatalf("/pins does not name the missing pin: %s", got)
	}
	// The missing pin does not block the next edit.
	if err := os.WriteFile(filepath.Join(dir, "other.md"), []byte("other notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := commandReply(t, url, "/pin other.md"); !strings.Contains(got, "Pinned other.md") {
		t.Fatalf("/pin beside a missing pin: %s", got)
	}
	m = post(t, url, "still there?")
	if got := waitAnswer(t, url, m.ID); got != "echo: still there?" {
		t.Fatalf("answer with a missing pin: %q", got)
	}
}
