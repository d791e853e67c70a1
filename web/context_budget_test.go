package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web"
)

// contextDocExample returns the JSON block after "<!-- example: NAME -->"
// in docs/CONTEXT.md.
func contextDocExample(t *testing.T, name string) []byte {
	t.Helper()
	doc, err := os.ReadFile("../docs/CONTEXT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- example: "+name+" -->\n```json\n")
	if !ok {
		t.Fatalf("docs/CONTEXT.md has no example %q", name)
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("example %q is not closed", name)
	}
	return []byte(block)
}

func decodeStrict(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, data)
	}
}

func hasWarning(p previewJSON, code string) bool {
	for _, w := range p.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

// TestContextBudgetAPI: the budget profile through the real server: the
// default at version 0; the doc's example stored at version 1; a stale
// update refused with 409 CONTEXT_BUDGET_CONFLICT changing nothing; an
// invalid one refused naming the problem; the prompt builder uses the
// stored profile (the rules' share is the overbudget line; the preview
// names the version); a stored profile edited into nonsense falls back to
// the default with CONTEXT_BUDGET_FALLBACK in the preview and the GET, and
// a PUT at its version replaces it. Rules past 500 are refused with
// CONTEXT_CAPACITY_EXCEEDED, and a prompt takes 500 rule entries at most.
func TestContextBudgetAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	model := llmtest.NewServer(t)
	base := t.TempDir()
	in := apptest.Start(t, apptest.Options{DatabaseURL: pool.Config().ConnString(), Model: model, Token: testToken,
		Configure: func(o *app.Config) { o.WorkspaceDir = base }})
	url := in.URL

	get := func() web.BudgetJSON {
		t.Helper()
		r, body := do(t, "GET", url+"/api/context/budget", testToken, "")
		if r.StatusCode != 200 {
			t.Fatalf("GET budget: %d %s", r.StatusCode, body)
		}
		var b web.BudgetJSON
		decodeStrict(t, []byte(body), &b)
		return b
	}
	def := get()
	if def.Version != 0 || len(def.Warnings) != 0 || def.Layers["rules"] != (services.LayerBudget{SharePercent: 15, MinTokens: 500}) || len(def.Layers) != 6 {
		t.Fatalf("default profile: %+v", def)
	}

	// A rule of about 40 tokens: within the default 15 % of the budget.
	r, body := do(t, "POST", url+"/api/rules", testToken, `{"text":"`+strings.Repeat("answer briefly ", 20)+`"}`)
	if r.StatusCode != 201 {
		t.Fatalf("add rule: %d %s", r.StatusCode, body)
	}
	if pv := getPreview(t, url); hasWarning(pv, "CONTEXT_RULES_OVERBUDGET") || hasWarning(pv, "CONTEXT_BUDGET_FALLBACK") {
		t.Fatalf("default profile warnings: %+v", pv.Warnings)
	}

	// The doc's example, stored.
	example := contextDocExample(t, "context-budget")
	var ex web.BudgetJSON
	decodeStrict(t, example, &ex)
	r, body = do(t, "PUT", url+"/api/context/budget", testToken, string(example))
	if r.StatusCode != 200 {
		t.Fatalf("PUT example: %d %s", r.StatusCode, body)
	}
	var stored web.BudgetJSON
	decodeStrict(t, []byte(body), &stored)
	if stored.Version != 1 || stored.Layers["retrieved"] != ex.Layers["retrieved"] {
		t.Fatalf("stored: %+v", stored)
	}

	// Stale: refused, nothing changed.
	tiny := strings.Replace(string(example), `"rules":     {"share_percent": 5,`, `"rules":     {"share_percent": 0,`, 1)
	if tiny == string(example) {
		t.Fatal("the example changed shape; fix the test's edit")
	}
	r, body = do(t, "PUT", url+"/api/context/budget", testToken, tiny)
	if r.StatusCode != 409 || !strings.Contains(body, `"code":"CONTEXT_BUDGET_CONFLICT"`) {
		t.Fatalf("stale PUT: %d %s", r.StatusCode, body)
	}
	if b := get(); b.Version != 1 || b.Layers["rules"].SharePercent != 5 {
		t.Fatalf("a stale PUT changed the profile: %+v", b)
	}

	// Invalid: named.
	for bad, want := range map[string]string{
		`{"version":1,"layers":{"rules":{"share_percent":90,"min_tokens":0}}}`:                              `layer \"settings\" is missing`,
		strings.Replace(tiny, `"version": 0`, `"version": 1`, 1)[:0] + `{"version":1}`:                      `missing`,
		strings.Replace(string(example), `"version": 0`, `"version": 1`, 1)[:0] + `{"version":1,"x":1}`:     `unknown field`,
		strings.Replace(strings.Replace(string(example), `"version": 0`, `"version": 1`, 1), `43`, `93`, 1): `add up to 150%`,
	} {
		r, body = do(t, "PUT", url+"/api/context/budget", testToken, bad)
		if r.StatusCode != 400 || !strings.Contains(body, "CONTEXT_BUDGET_INVALID") || !strings.Contains(body, want) {
			t.Fatalf("PUT %s: %d %s (want %q)", bad, r.StatusCode, body, want)
		}
	}

	// The builder uses the stored profile: rules' share 0 % makes any rule
	// over budget; the preview names the version.
	tiny = strings.Replace(tiny, `"version": 0`, `"version": 1`, 1)
	r, body = do(t, "PUT", url+"/api/context/budget", testToken, tiny)
	if r.StatusCode != 200 {
		t.Fatalf("PUT: %d %s", r.StatusCode, body)
	}
	pv := getPreview(t, url)
	if !hasWarning(pv, "CONTEXT_RULES_OVERBUDGET") {
		t.Fatalf("the stored profile is not used: %+v", pv.Warnings)
	}
	_, raw := do(t, "GET", url+"/api/context/preview", testToken, "")
	if !strings.Contains(raw, `"budget_version":2`) {
		t.Fatalf("the preview does not name the profile's version: %.300s", raw)
	}

	// A profile edited by hand into nonsense: the default, named.
	if _, err := pool.Exec(ctx, `UPDATE context_budgets SET profile = '{"layers":{"rules":{"share_percent":900}}}'`); err != nil {
		t.Fatal(err)
	}
	pv = getPreview(t, url)
	if !hasWarning(pv, "CONTEXT_BUDGET_FALLBACK") || hasWarning(pv, "CONTEXT_RULES_OVERBUDGET") {
		t.Fatalf("invalid stored profile: %+v", pv.Warnings)
	}
	fb := get()
	if fb.Version != 2 || len(fb.Warnings) != 1 || fb.Warnings[0].Code != "CONTEXT_BUDGET_FALLBACK" ||
		!strings.Contains(fb.Warnings[0].Message, "is not valid") || fb.Layers["rules"].SharePercent != 15 {
		t.Fatalf("GET of an invalid stored profile: %+v", fb)
	}
	r, body = do(t, "PUT", url+"/api/context/budget", testToken, strings.Replace(string(example), `"version": 0`, `"version": 2`, 1))
	if r.StatusCode != 200 || get().Version != 3 || hasWarning(getPreview(t, url), "CONTEXT_BUDGET_FALLBACK") {
		t.Fatalf("PUT over an invalid profile: %d %s", r.StatusCode, body)
	}

	// Two updates at the same version at once: one is stored, the other
	// refused with CONTEXT_BUDGET_CONFLICT.
	same := strings.Replace(string(example), `"version": 0`, `"version": 3`, 1)
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			r, _ := do(t, "PUT", url+"/api/context/budget", testToken, same)
			codes <- r.StatusCode
		}()
	}
	if a, b := <-codes, <-codes; a+b != 200+409 {
		t.Fatalf("two updates at version 3: %d and %d, want one 200 and one 409", a, b)
	}
	if b := get(); b.Version != 4 {
		t.Fatalf("after the race: version %d", b.Version)
	}

	// Capacity: 500 rules at most, the 501st refused with a clear error.
	if _, err := pool.Exec(ctx, `INSERT INTO context_constraints (timeline_scope, text, hard)
		SELECT $1, 'r' || g, false FROM generate_series(2, 500) g`, services.DefaultTimeline); err != nil {
		t.Fatal(err)
	}
	r, body = do(t, "POST", url+"/api/rules", testToken, `{"text":"one too many"}`)
	if r.StatusCode != 400 || !strings.Contains(body, `"code":"CONTEXT_CAPACITY_EXCEEDED"`) || !strings.Contains(body, "500 rules") {
		t.Fatalf("501st rule: %d %s", r.StatusCode, body)
	}
	// One more written around the check (a restore, a hand edit): the
	// prompt takes 500 and names the rest.
	if _, err := pool.Exec(ctx, `INSERT INTO context_constraints (timeline_scope, text, hard) VALUES ($1, 'r501', false)`, services.DefaultTimeline); err != nil {
		t.Fatal(err)
	}
	pv = getPreview(t, url)
	found := false
	for _, w := range pv.Warnings {
		found = found || w.Code == "CONTEXT_CAPACITY_EXCEEDED" && strings.Contains(w.Message, "501 rule entries")
	}
	if !found || strings.Contains(pv.Request.System, "r501") || !strings.Contains(pv.Request.System, "] r500") {
		t.Fatalf("501 rule entries: %+v", pv.Warnings)
	}
}
