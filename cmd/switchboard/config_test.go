package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:8080" || c.LLMProvider != "offline" || c.LocalPGPort != 55432 || !c.FlagsByDatabase || c.DataDir == "" {
		t.Fatalf("defaults: %+v", c)
	}
	if c.PublicURL != "http://127.0.0.1:8080" {
		t.Fatalf("public url default %q", c.PublicURL)
	}
}

func TestLoadConfigFlagMatrix(t *testing.T) {
	for _, tc := range []struct {
		write, read string
		mode        string
		wantErr     string
	}{
		{"0", "0", "legacy", ""},
		{"1", "0", "dual-write", ""},
		{"1", "1", "scoped", ""},
		{"0", "1", "", "AGENT_CONTEXT_SCOPED_READ=1 needs AGENT_CONTEXT_SCOPED_WRITE=1"},
		{"2", "0", "", "AGENT_CONTEXT_SCOPED_WRITE: want 0 or 1"},
	} {
		c, err := LoadConfig(env(map[string]string{"AGENT_CONTEXT_SCOPED_WRITE": tc.write, "AGENT_CONTEXT_SCOPED_READ": tc.read}))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("W=%s R=%s: want error %q, got %v", tc.write, tc.read, tc.wantErr, err)
			}
			continue
		}
		if err != nil || c.Flags.Mode() != tc.mode {
			t.Errorf("W=%s R=%s: mode %v err %v", tc.write, tc.read, c, err)
		}
	}
}

func TestLoadConfigErrorsNameEveryVariable(t *testing.T) {
	_, err := LoadConfig(env(map[string]string{
		"HTTP_ADDR":          "nonsense",
		"LLM_PROVIDER":       "gpt",
		"LLM_CONTEXT_WINDOW": "12",
		"LOCAL_PG_PORT":      "99999",
		"WEB_AUTH_TOKEN":     "s3cr3tval",
		"LLM_TIMEOUT":        "-3s",
		"AGENT_PROFILES":     `{"researcher": {"sytem": "typo"}}`,
	}))
	if err == nil {
		t.Fatal("want error")
	}
	for _, name := range []string{"HTTP_ADDR", "LLM_PROVIDER", "LLM_CONTEXT_WINDOW", "LOCAL_PG_PORT", "WEB_AUTH_TOKEN", "LLM_TIMEOUT", "AGENT_PROFILES"} {
		if !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
	if strings.Contains(err.Error(), "s3cr3tval") {
		t.Errorf("error echoes a secret value: %v", err)
	}
}

// TestEveryEnvVarDocumented keeps the README's env table true to the code.
func TestEveryEnvVarDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range envTable() {
		if !strings.Contains(string(readme), "| `"+v.Name+"` |") {
			t.Errorf("README.md env table lacks %s", v.Name)
		}
	}
}

func TestAgentProfiles(t *testing.T) {
	c, err := LoadConfig(env(map[string]string{"AGENT_PROFILES": `{"researcher":{"system":"Find facts.","tools":["search"],"model":"small"}}`}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.AgentProfiles["researcher"]
	if p.SystemPrompt != "Find facts." || len(p.Tools) != 1 || p.Model != "small" {
		t.Fatalf("profile: %+v", p)
	}
}

// TestLLMMaxRetriesZeroIsNone: LLM_MAX_RETRIES=0 disables retries, though
// llm.Config's zero value means the default.
func TestLLMMaxRetriesZeroIsNone(t *testing.T) {
	c, err := LoadConfig(env(map[string]string{"LLM_MAX_RETRIES": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.LLMOptions().MaxRetries; got >= 0 {
		t.Fatalf("MaxRetries = %d, want negative (none)", got)
	}
}

func TestWriteBoundSizes(t *testing.T) {
	c, err := LoadConfig(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.AgentMaxWriteBytes != 1<<20 || c.AgentMaxRunWriteBytes != 8<<20 || c.WorkspaceMaxBytes != 256<<20 || c.AgentRulesWritable {
		t.Fatalf("defaults: %d %d %d %v", c.AgentMaxWriteBytes, c.AgentMaxRunWriteBytes, c.WorkspaceMaxBytes, c.AgentRulesWritable)
	}
	for v, want := range map[string]int64{"4096": 4096, "64KiB": 64 << 10, "2 MiB": 2 << 20, "1GiB": 1 << 30} {
		c, err := LoadConfig(env(map[string]string{"AGENT_MAX_WRITE_BYTES": v}))
		if err != nil || c.AgentMaxWriteBytes != want {
			t.Errorf("%q: %v %v, want %d", v, c, err, want)
		}
	}
	for _, v := range []string{"lots", "-1", "0", "2GiB", "1.5MiB", "9223372036854775807GiB"} {
		_, err := LoadConfig(env(map[string]string{"AGENT_MAX_WRITE_BYTES": v}))
		if err == nil || !strings.Contains(err.Error(), "AGENT_MAX_WRITE_BYTES:") {
			t.Errorf("%q: want an error naming AGENT_MAX_WRITE_BYTES, got %v", v, err)
		}
	}
}

// TestToolsCore: TOOLS_CORE takes names and whole MCP servers; anything
// else is refused naming the entry; unset it is nil (the runtime picks
// the default core set, main's by mode: agent.Service.mainCore).
func TestToolsCore(t *testing.T) {
	c, err := LoadConfig(env(map[string]string{"TOOLS_CORE": "read_file, everything__*,fetch_url"}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.ToolsCore, " ") != "read_file everything__* fetch_url" {
		t.Fatalf("TOOLS_CORE read as %q", c.ToolsCore)
	}
	if c, err = LoadConfig(env(nil)); err != nil || c.ToolsCore != nil || c.ToolsDeferOver != 2000 {
		t.Fatalf("defaults: %v %d %v", c.ToolsCore, c.ToolsDeferOver, err)
	}
	for _, bad := range []string{"read file", "fs__x*", "*", " , "} {
		if _, err := LoadConfig(env(map[string]string{"TOOLS_CORE": bad})); err == nil || !strings.Contains(err.Error(), "TOOLS_CORE:") {
			t.Errorf("TOOLS_CORE=%q: %v", bad, err)
		}
	}
	if _, err := LoadConfig(env(map[string]string{"TOOLS_DEFER_OVER": "-1"})); err == nil || !strings.Contains(err.Error(), "TOOLS_DEFER_OVER:") {
		t.Errorf("TOOLS_DEFER_OVER=-1: %v", err)
	}
}

// TestDBMaxConns: DB_MAX_CONNS caps the pool; a cap below what the workers
// need (a pool that could deadlock) is refused naming the number needed,
// and the default is what runs (no outbound lanes without Telegram).
func TestDBMaxConns(t *testing.T) {
	c, err := LoadConfig(env(map[string]string{"AGENT_WORKERS": "2", "DB_MAX_CONNS": "40"}))
	if err != nil || c.PoolSize() != 40 {
		t.Fatalf("DB_MAX_CONNS=40: %v, pool %d", err, c.PoolSize())
	}
	c, err = LoadConfig(env(map[string]string{"AGENT_WORKERS": "2"}))
	if err != nil || c.PoolSize() != app.ServePoolSize(app.PoolNeeds{TurnWorkers: 2}) || c.PoolSize() > 30 {
		t.Fatalf("AGENT_WORKERS=2: %v, pool %d", err, c.PoolSize())
	}
	need := app.ServePoolSize(app.PoolNeeds{TurnWorkers: 16})
	_, err = LoadConfig(env(map[string]string{"DB_MAX_CONNS": "10"}))
	if err == nil || !strings.Contains(err.Error(), "DB_MAX_CONNS: 10 is below the "+strconv.Itoa(need)+" connections") {
		t.Fatalf("DB_MAX_CONNS=10 with 16 workers: %v", err)
	}
}
