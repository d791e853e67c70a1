package mcp

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/switchboard/services"
)

func TestToolEffectFromAnnotationsAndConfig(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name string
		cfg  ServerConfig
		tool mcp.Tool
		want services.Effect
	}{
		{"no annotations", ServerConfig{}, mcp.Tool{Name: "write"}, services.EffectExternal},
		{"readOnlyHint", ServerConfig{}, mcp.Tool{Name: "get", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, services.EffectRead},
		{"destructiveHint", ServerConfig{}, mcp.Tool{Name: "rm", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, services.EffectDestructive},
		{"destructiveHint false", ServerConfig{}, mcp.Tool{Name: "add", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}}, services.EffectExternal},
		// A server that calls a tool both read-only and destructive is
		// not believed on the first: the owner is asked before it runs.
		{"readOnlyHint and destructiveHint", ServerConfig{}, mcp.Tool{Name: "purge", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}}, services.EffectDestructive},
		{"configured read_only", ServerConfig{ReadOnly: []string{"rm"}}, mcp.Tool{Name: "rm", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, services.EffectRead},
	}
	for _, c := range cases {
		if got := toolEffect(c.cfg, &c.tool); got != c.want {
			t.Errorf("%s: effect %q, want %q", c.name, got, c.want)
		}
	}
}
