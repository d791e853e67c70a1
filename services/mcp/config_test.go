package mcp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services/mcp"
)

// TestParseConfig: the block other MCP clients use is accepted as JSON or
// as a file; mistakes are refused naming the server and what is wrong.
func TestParseConfig(t *testing.T) {
	t.Parallel()
	block := `{"mcpServers":{
		"fs":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/srv"],"env":{"A":"1"}},
		"web":{"type":"http","url":"https://example.test/mcp","headers":{"Authorization":"Bearer x"},"timeout":"15s","deny":["delete"]},
		"off":{"command":"x","disabled":true}}}`
	cfg, err := mcp.ParseConfig(block)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg) != 2 || cfg["fs"].Command != "npx" || cfg["fs"].Env["A"] != "1" || cfg["web"].Transport() != "http" ||
		time.Duration(cfg["web"].Timeout) != 15*time.Second || cfg["web"].Deny[0] != "delete" {
		t.Fatalf("parsed %+v", cfg)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if fromFile, err := mcp.ParseConfig(path); err != nil || len(fromFile) != 2 {
		t.Fatalf("from a file: %v %+v", err, fromFile)
	}
	if bare, err := mcp.ParseConfig(`{"fs":{"command":"x"}}`); err != nil || bare["fs"].Command != "x" {
		t.Fatalf("bare servers object: %v %+v", err, bare)
	}
	if empty, err := mcp.ParseConfig(""); err != nil || len(empty) != 0 {
		t.Fatalf("empty: %v %+v", err, empty)
	}
	for _, c := range []struct{ in, want string }{
		{`{"mcpServers":{"fs":{}}}`, `server "fs": needs "command"`},
		{`{"mcpServers":{"fs":{"command":"x","url":"http://a"}}}`, `server "fs": has both`},
		{`{"mcpServers":{"a b":{"command":"x"}}}`, `server "a b": the name`},
		{`{"mcpServers":{"a__b":{"command":"x"}}}`, `server "a__b": the name`},
		{`{"mcpServers":{"w":{"url":"ftp://x"}}}`, `server "w": "url" must start`},
		{`{"mcpServers":{"w":{"url":"http://x","type":"sse"}}}`, `server "w": the legacy SSE transport`},
		{`{"mcpServers":{"w":{"command":"x","type":"http"}}}`, `server "w": "type" "http" does not match`},
		{`{"mcpServers":{"w":{"command":"x","timeout":"soon"}}}`, `server "w": `},
		{`{"mcpServers":`, `MCP_SERVERS: `},
		{`/nonexistent/mcp.json`, `neither JSON nor a readable file`},
	} {
		_, err := mcp.ParseConfig(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseConfig(%s) = %v; want an error containing %q", c.in, err, c.want)
		}
	}
}
