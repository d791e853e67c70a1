package prompt

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func samplePrefix() PrefixParts {
	return PrefixParts{
		System: "You are Switchboard.",
		Tools: []services.ToolSpec{
			{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Name: "delegate", Description: "Start a sub-agent.", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "grep", Description: "Search.", Parameters: nil},
		},
		Rules:    "Never delete history.",
		Settings: "Prefers short answers.",
	}
}

func TestPrefixHashDeterministic(t *testing.T) {
	t.Parallel()
	base := PrefixHash(samplePrefix())
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(base) {
		t.Fatalf("hash %q is not hex SHA-256", base)
	}
	if PrefixHash(samplePrefix()) != base {
		t.Fatal("same input, different hash")
	}

	reordered := samplePrefix()
	reordered.Tools[0], reordered.Tools[2] = reordered.Tools[2], reordered.Tools[0]
	if PrefixHash(reordered) != base {
		t.Error("tool order changed the hash")
	}
	reformatted := samplePrefix()
	reformatted.Tools[0].Parameters = json.RawMessage("{\n  \"properties\": {\"path\": {\"type\": \"string\"}},\n  \"type\": \"object\"\n}")
	if PrefixHash(reformatted) != base {
		t.Error("equivalent JSON schema changed the hash")
	}
}

func TestPrefixHashChanges(t *testing.T) {
	t.Parallel()
	base := PrefixHash(samplePrefix())
	changes := map[string]func(p *PrefixParts){
		"system":        func(p *PrefixParts) { p.System += " " },
		"rules":         func(p *PrefixParts) { p.Rules = "Other rule." },
		"settings":      func(p *PrefixParts) { p.Settings = "" },
		"tool name":     func(p *PrefixParts) { p.Tools[1].Name = "delegate2" },
		"description":   func(p *PrefixParts) { p.Tools[1].Description = "Start a sub-agent!" },
		"parameters":    func(p *PrefixParts) { p.Tools[1].Parameters = json.RawMessage(`{"type":"array"}`) },
		"tool removed":  func(p *PrefixParts) { p.Tools = p.Tools[:2] },
		"tool added":    func(p *PrefixParts) { p.Tools = append(p.Tools, services.ToolSpec{Name: "x"}) },
		"invalid json":  func(p *PrefixParts) { p.Tools[2].Parameters = json.RawMessage(`{`) },
		"moved between": func(p *PrefixParts) { p.System, p.Rules = p.System+p.Rules, "" },
	}
	seen := map[string]string{base: "base"}
	for name, change := range changes {
		p := samplePrefix()
		change(&p)
		h := PrefixHash(p)
		if prev, dup := seen[h]; dup {
			t.Errorf("%s: hash equals %s's", name, prev)
		}
		seen[h] = name
	}
}
