// Package mcp gives the agent the tools of Model Context Protocol servers:
// servers started as commands (stdio) or reached over streamable HTTP,
// configured in the block MCP clients already use, their tools joining the
// tool registry as <server>__<tool>. A Manager keeps each server connected,
// restarts one that ends with backoff, bounds every call, and turns every
// failure into a tool error the model can act on.
package mcp

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// ServerConfig is one server of MCP_SERVERS. Exactly one of Command and URL
// is set.
type ServerConfig struct {
	// Command, Args and Env start a stdio server. It gets Env and PATH,
	// HOME, LANG and TMPDIR of the service, nothing else of its
	// environment (no secrets of the service).
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	// URL and Headers reach a streamable HTTP server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Type is optional ("stdio", "http" or "streamable-http"), as other
	// clients write it; it must agree with Command or URL.
	Type string `json:"type,omitempty"`
	// Disabled servers are not started.
	Disabled bool `json:"disabled,omitempty"`
	// Allow, when not empty, lists the only tools of the server offered;
	// Deny lists tools never offered (names as the server gives them).
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// ReadOnly lists tools (names as the server gives them) known to change
	// nothing, whatever their annotations say: their effect class is read
	// instead of external (docs/SECURITY.md).
	ReadOnly []string `json:"read_only,omitempty"`
	// Secret names env variables and headers whose values are secrets of
	// the service: never in a prompt, refused in an outbound tool argument
	// (docs/SECURITY.md).
	Secret []string `json:"secret,omitempty"`
	// Timeout bounds one call ("30s"; default 60s).
	Timeout Duration `json:"timeout,omitempty"`
	// Shared offers the server's tools on every timeline; by default only
	// the owner's timeline gets them.
	Shared bool `json:"shared,omitempty"`
	// HistoryMaxChars bounds a result of the server once it is no longer the
	// newest turn (default 1500).
	HistoryMaxChars int `json:"history_max_chars,omitempty"`
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

// UnmarshalJSON reads "30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if err := json.Unmarshal(b, &secs); err != nil {
			return fmt.Errorf(`a duration is a string such as "30s"`)
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Transport is "stdio" or "http".
func (c ServerConfig) Transport() string {
	if c.URL != "" {
		return "http"
	}
	return "stdio"
}

// Config is the servers by name.
type Config map[string]ServerConfig

// Names returns the server names, sorted.
func (c Config) Names() []string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,30}$`)

// ParseConfig reads MCP_SERVERS: the JSON itself, or the path of a file
// holding it, in the shape {"mcpServers": {"name": {...}}} (the block other
// MCP clients use; a bare {"name": {...}} is accepted too). Empty: no
// servers. Errors name the server and the field.
func ParseConfig(v string) (Config, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return Config{}, nil
	}
	raw := []byte(v)
	if !strings.HasPrefix(v, "{") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("MCP_SERVERS is neither JSON nor a readable file: %v", err)
		}
		raw = b
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("MCP_SERVERS: %v", err)
	}
	servers := doc.MCPServers
	if servers == nil {
		if err := json.Unmarshal(raw, &servers); err != nil {
			return nil, fmt.Errorf("MCP_SERVERS: %v", err)
		}
	}
	cfg := Config{}
	for name, body := range servers {
		var c ServerConfig
		if err := json.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("MCP_SERVERS: server %q: %v", name, err)
		}
		if err := c.validate(name); err != nil {
			return nil, err
		}
		if !c.Disabled {
			cfg[name] = c
		}
	}
	return cfg, nil
}

func (c ServerConfig) validate(name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("MCP_SERVERS: server %q: %s", name, fmt.Sprintf(format, args...))
	}
	switch {
	case !serverNameRE.MatchString(name) || strings.Contains(name, "__"):
		return bad("the name must be 1 to 30 letters, digits, _ or - (and no \"__\"): it prefixes the server's tool names")
	case c.Command == "" && c.URL == "":
		return bad(`needs "command" (a stdio server) or "url" (a streamable HTTP server)`)
	case c.Command != "" && c.URL != "":
		return bad(`has both "command" and "url"; give one`)
	case c.URL != "" && !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://"):
		return bad(`"url" must start with http:// or https://`)
	case c.Timeout < 0:
		return bad(`"timeout" must be positive`)
	}
	switch c.Type {
	case "", "stdio", "http", "streamable-http", "streamableHttp":
	case "sse":
		return bad(`the legacy SSE transport is not supported; use the server's streamable HTTP endpoint`)
	default:
		return bad(`unknown "type" %q (stdio or http)`, c.Type)
	}
	if c.Type == "stdio" && c.Command == "" || (c.Type != "" && c.Type != "stdio" && c.URL == "") {
		return bad(`"type" %q does not match the %s given`, c.Type, map[bool]string{true: "command", false: "url"}[c.Command != ""])
	}
	return nil
}

// SecretValues are the values of the env variables and headers the
// servers mark secret.
func (c Config) SecretValues() []string {
	var out []string
	for _, srv := range c {
		for _, name := range srv.Secret {
			if v, ok := srv.Env[name]; ok {
				out = append(out, v)
			}
			if v, ok := srv.Headers[name]; ok {
				out = append(out, strings.TrimPrefix(v, "Bearer "))
			}
		}
	}
	return out
}
