package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services/payload"
)

// TestContextPayloadCLI runs the built binary's `switchboard context` on a
// real database: each mode writes exactly one JSON object to stdout (the
// context_payload.v2 contract, unknown fields refused) within its budget;
// index finds the row the query names; detail returns the ids asked and,
// over budget, degrades and says so; map lists the workspace's headings
// and symbols; a bad mode is an error on stderr with nothing on stdout.
func TestContextPayloadCLI(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	pool, schema := dbtest.Schema(t)
	dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content) VALUES
		('user', 'web', 'Our staging server is called heron; it runs the billing jobs.'),
		('assistant', 'web', 'Noted: heron runs billing.'),
		('user', 'web', $1), ('user', 'web', $1)`, strings.Repeat("a very long pasted log line ", 2000))
	dataDir := t.TempDir()
	ws := filepath.Join(dataDir, "workspaces", "global")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"notes.md": "# Goals\n\n## This week\n\nShip it.\n",
		"tool.go":  "package tool\n\nfunc Run() error { return nil }\n\ntype Job struct{}\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dbURL := apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema))
	profiles := ""
	runCLI := func(args ...string) (payload.Payload, string, error) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"context"}, args...)...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "DATA_DIR="+dataDir, "LOG_LEVEL=info", "AGENT_PROFILES="+profiles)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			return payload.Payload{}, stdout.String() + "|" + stderr.String(), err
		}
		dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
		dec.DisallowUnknownFields()
		var p payload.Payload
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("context %v: stdout is not a payload: %v\n%s", args, err, stdout.String())
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("context %v: stdout holds more than one JSON object:\n%s", args, stdout.String())
		}
		if p.Version != payload.Version || p.Budget.BudgetTokens <= 0 || p.Budget.TokensApprox > p.Budget.BudgetTokens ||
			p.Budget.DowngradeApplied == nil || p.Observations.Items == nil || p.RepoMap.Items == nil || p.Notes == nil {
			t.Fatalf("context %v: %+v", args, p)
		}
		return p, stderr.String(), nil
	}

	p, _, err := runCLI("--mode", "index", "--query", "heron billing")
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != "index" || len(p.Observations.Items) == 0 || p.Observations.Items[0].SchemaVersion != payload.ObsVersion ||
		!strings.Contains(p.Observations.Items[0].Summary+p.Observations.Items[len(p.Observations.Items)-1].Summary, "heron") {
		t.Fatalf("index: %+v", p)
	}
	for _, it := range p.Observations.Items {
		if it.Detail != "" || len([]rune(it.Summary)) > 120 {
			t.Fatalf("index items carry summaries only: %+v", it)
		}
	}

	// Two long rows of about 5,000 tokens each: over detail's 6,000.
	p, _, err = runCLI("--mode", "detail", "--ids", "m1,m3,m4")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Observations.Items) != 3 || p.Observations.Items[0].Ref != "m1" || p.Observations.Items[2].Ref != "m4" ||
		p.Observations.Items[2].Detail != "" || len(p.Budget.DowngradeApplied) == 0 || p.Budget.DowngradeApplied[0] != "detail→timeline" {
		t.Fatalf("detail over budget: %.600v", p)
	}
	if p, _, err = runCLI("--mode", "detail", "--ids", "m1"); err != nil || len(p.Observations.Items) != 1 ||
		!strings.Contains(p.Observations.Items[0].Detail, "billing jobs") || len(p.Budget.DowngradeApplied) != 0 {
		t.Fatalf("detail within budget: %v %+v", err, p)
	}

	p, _, err = runCLI("--mode", "map")
	if err != nil {
		t.Fatal(err)
	}
	syms := map[string]string{}
	for _, it := range p.RepoMap.Items {
		for _, s := range it.Symbols {
			syms[it.Path+" "+s.Name] = s.Kind
		}
	}
	if syms["notes.md Goals/This week"] != "heading" || syms["tool.go Run"] != "function" || syms["tool.go Job"] != "class" {
		t.Fatalf("map: %+v", p.RepoMap)
	}

	// A sub-agent profile's budgets: its caps and its downgrade order
	// apply; a profile that names none has the defaults.
	profiles = `{"tight":{"context":{"budgets":{"index_tokens":400,"detail_tokens":2000},` +
		`"max_per_source_tokens":{"observations":1000},"top_k":{"index":1},"downgrade_order":["index","detail"]}},"plain":{}}`
	if p, _, err = runCLI("--profile", "tight", "--mode", "detail", "--ids", "m1,m3,m4"); err != nil || p.SubagentType != "tight" ||
		p.Budget.BudgetTokens != 2000 || len(p.Observations.Items) != 1 || p.Observations.Items[0].Ref != "m1" ||
		p.Observations.Items[0].Detail != "" || strings.Join(p.Budget.DowngradeApplied, ",") != "detail→index" {
		t.Fatalf("tight detail over budget: %v %.600v", err, p)
	}
	if p, _, err = runCLI("--profile", "tight", "--mode", "detail", "--ids", "m3"); err != nil || len(p.Observations.Items) != 1 ||
		len([]rune(p.Observations.Items[0].Detail)) > 1000*4+100 || len([]rune(p.Observations.Items[0].Detail)) < 1000*4-100 ||
		len(p.Budget.DowngradeApplied) != 0 {
		t.Fatalf("tight detail, one long row cut to the observations' cap: %v %.300v", err, p)
	}
	if p, _, err = runCLI("--profile", "tight", "--mode", "index"); err != nil || p.Budget.BudgetTokens != 400 || len(p.Observations.Items) != 1 {
		t.Fatalf("tight index: %v %+v", err, p)
	}
	if p, _, err = runCLI("--profile", "plain", "--mode", "detail", "--ids", "m1,m3,m4"); err != nil || p.Budget.BudgetTokens != 6000 ||
		len(p.Observations.Items) != 3 || p.Budget.DowngradeApplied[0] != "detail→timeline" {
		t.Fatalf("a profile without budgets has the defaults: %v %.300v", err, p)
	}
	profiles = `{"bad":{"context":{"top_k":{"index":0}}}}`
	if _, out, err := runCLI("--profile", "bad", "--mode", "index"); err == nil || !strings.HasPrefix(out, "|") ||
		!strings.Contains(out, `profile "bad": context: top_k.index 0: want 1 to 1000`) {
		t.Fatalf("an invalid profile: %v %q", err, out)
	}
	profiles = `{"bad":{"context":{"downgrade_order":["index","summary"]}}}`
	if _, out, err := runCLI("--mode", "index"); err == nil || !strings.Contains(out, `context: downgrade_order[1] "summary"`) {
		t.Fatalf("an invalid downgrade order: %v %q", err, out)
	}
	profiles = ""

	if _, out, err := runCLI("--mode", "everything"); err == nil || !strings.HasPrefix(out, "|") || !strings.Contains(out, `mode "everything"`) {
		t.Fatalf("bad mode: %v %q", err, out)
	}
}
