package services

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Decision is what the policy says about one tool call.
type Decision string

// Decisions.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

func parseDecision(s string) (Decision, error) {
	switch d := Decision(s); d {
	case Allow, Ask, Deny:
		return d, nil
	}
	return "", fmt.Errorf("unknown decision %q (one of allow, ask, deny)", s)
}

// PolicyKey selects a cell of the policy table.
type PolicyKey struct {
	Starter Starter
	Tainted bool
}

func (k PolicyKey) String() string {
	if k.Tainted {
		return string(k.Starter) + "/tainted"
	}
	return string(k.Starter) + "/clean"
}

// Policy decides allow, ask or deny per (who started the run, tainted or
// not, effect class), with per-tool and per-MCP-server overrides. The zero
// value is unusable: start from DefaultPolicy or ParsePolicy.
type Policy struct {
	// Table holds a decision per cell and effect; every cell and effect is set.
	Table map[PolicyKey]map[Effect]Decision
	// Tools and Servers override the table for one tool or every tool of
	// one MCP server. Keys of each map: "*", "clean", "tainted", a starter
	// ("owner"), or starter/taint ("owner/tainted"); the most specific wins.
	Tools   map[string]map[string]Decision
	Servers map[string]map[string]Decision
}

// DefaultPolicy is the policy in force without POLICY: an untainted owner
// run may do everything; a tainted run asks before anything that lasts or
// leaves; a stranger gets nothing that lasts or leaves; a schedule's fire
// runs as the owner's but never execs unless granted; a sub-agent as the
// owner's (exec only where its profile lists it).
func DefaultPolicy() *Policy {
	p := &Policy{Table: map[PolicyKey]map[Effect]Decision{}, Tools: map[string]map[string]Decision{}, Servers: map[string]map[string]Decision{}}
	row := func(persist, egress, external, destructive, exec Decision) map[Effect]Decision {
		return map[Effect]Decision{EffectRead: Allow, EffectWorkspace: Allow, EffectPersist: persist, EffectEgress: egress,
			EffectExternal: external, EffectDestructive: destructive, EffectExec: exec}
	}
	p.Table[PolicyKey{StarterOwner, false}] = row(Allow, Allow, Allow, Allow, Allow)
	p.Table[PolicyKey{StarterOwner, true}] = row(Ask, Ask, Ask, Ask, Ask)
	p.Table[PolicyKey{StarterStranger, false}] = row(Deny, Deny, Deny, Deny, Deny)
	p.Table[PolicyKey{StarterStranger, true}] = row(Deny, Deny, Deny, Deny, Deny)
	p.Table[PolicyKey{StarterSchedule, false}] = row(Allow, Allow, Allow, Allow, Deny)
	p.Table[PolicyKey{StarterSchedule, true}] = row(Ask, Ask, Ask, Ask, Deny)
	p.Table[PolicyKey{StarterSubagent, false}] = row(Allow, Allow, Allow, Allow, Allow)
	p.Table[PolicyKey{StarterSubagent, true}] = row(Ask, Ask, Ask, Ask, Ask)
	return p
}

// Decide returns the decision for a call of tool (of MCP server, "" for a
// built-in tool) with effect, in a run started by starter, tainted or not.
// A stranger never gets more than read and workspace, whatever overrides say.
func (p *Policy) Decide(k PolicyKey, effect Effect, tool, server string) Decision {
	d := p.Table[k][effect]
	if d == "" {
		d = Ask
	}
	if o, ok := override(p.Servers[server], k); ok && server != "" {
		d = o
	}
	if o, ok := override(p.Tools[tool], k); ok {
		d = o
	}
	if k.Starter == StarterStranger && effect != EffectRead && effect != EffectWorkspace {
		return Deny
	}
	return d
}

func override(m map[string]Decision, k PolicyKey) (Decision, bool) {
	if m == nil {
		return "", false
	}
	taint := "clean"
	if k.Tainted {
		taint = "tainted"
	}
	for _, key := range []string{string(k.Starter) + "/" + taint, string(k.Starter), taint, "*"} {
		if d, ok := m[key]; ok {
			return d, true
		}
	}
	return "", false
}

// policyFile is POLICY's JSON: table cells ("owner/tainted") to effect to
// decision, and the overrides.
type policyFile struct {
	Table   map[string]map[string]string `json:"table"`
	Tools   map[string]map[string]string `json:"tools"`
	Servers map[string]map[string]string `json:"servers"`
}

// ParsePolicy reads POLICY: a JSON object, or the path of a file holding
// one, applied over DefaultPolicy. Every unknown key, starter, effect or
// decision is an EINVALID error naming it. "" is the default policy.
func ParsePolicy(v string) (*Policy, error) {
	p := DefaultPolicy()
	v = strings.TrimSpace(v)
	if v == "" {
		return p, nil
	}
	data := []byte(v)
	if !strings.HasPrefix(v, "{") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, Errorf(EINVALID, "POLICY: not a JSON object and not a readable file: %v", err)
		}
		data = b
	}
	var f policyFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, Errorf(EINVALID, "POLICY: %v (want {\"table\":{\"owner/tainted\":{\"egress\":\"allow\"}},\"tools\":{...},\"servers\":{...}})", err)
	}
	for cell, effects := range f.Table {
		keys, err := parseCell(cell)
		if err != nil {
			return nil, Errorf(EINVALID, "POLICY table: %v", err)
		}
		for e, d := range effects {
			eff, err := ParseEffect(e)
			if err != nil {
				return nil, Errorf(EINVALID, "POLICY table %q: %s", cell, ErrorMessage(err))
			}
			dd, err := parseDecision(d)
			if err != nil {
				return nil, Errorf(EINVALID, "POLICY table %q %s: %v", cell, e, err)
			}
			for _, k := range keys {
				p.Table[k][eff] = dd
			}
		}
	}
	for what, src := range map[string]map[string]map[string]string{"tools": f.Tools, "servers": f.Servers} {
		dst := p.Tools
		if what == "servers" {
			dst = p.Servers
		}
		for name, m := range src {
			out := map[string]Decision{}
			for key, d := range m {
				if key != "*" {
					if _, err := parseCell(key); err != nil {
						return nil, Errorf(EINVALID, "POLICY %s %q: %v", what, name, err)
					}
				}
				dd, err := parseDecision(d)
				if err != nil {
					return nil, Errorf(EINVALID, "POLICY %s %q %q: %v", what, name, key, err)
				}
				out[key] = dd
			}
			dst[name] = out
		}
	}
	return p, nil
}

// parseCell reads "owner/tainted", "owner/clean", "owner" (both), "tainted"
// or "clean" (every starter).
func parseCell(s string) ([]PolicyKey, error) {
	starter, taint, hasTaint := strings.Cut(s, "/")
	var starters []Starter
	var taints []bool
	switch {
	case !hasTaint && (s == "clean" || s == "tainted"):
		starters, taint, hasTaint = Starters, s, true
	default:
		ok := false
		for _, x := range Starters {
			if string(x) == starter {
				starters, ok = []Starter{x}, true
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown cell %q (want STARTER, STARTER/clean, STARTER/tainted, clean or tainted; starters: owner, stranger, schedule, subagent)", s)
		}
	}
	switch {
	case !hasTaint:
		taints = []bool{false, true}
	case taint == "clean":
		taints = []bool{false}
	case taint == "tainted":
		taints = []bool{true}
	default:
		return nil, fmt.Errorf("unknown cell %q (the part after / is clean or tainted)", s)
	}
	var out []PolicyKey
	for _, st := range starters {
		for _, t := range taints {
			out = append(out, PolicyKey{st, t})
		}
	}
	return out, nil
}

// String renders the table in force and its overrides, for /policy.
func (p *Policy) String() string {
	var b strings.Builder
	// A GitHub-flavoured Markdown table (every channel renders it), then
	// the overrides as a list after a blank line.
	b.WriteString("who/taint")
	for _, e := range Effects {
		fmt.Fprintf(&b, " | %s", e)
	}
	b.WriteString("\n---")
	b.WriteString(strings.Repeat(" | ---", len(Effects)))
	b.WriteString("\n")
	for _, st := range Starters {
		for _, t := range []bool{false, true} {
			k := PolicyKey{st, t}
			b.WriteString(k.String())
			for _, e := range Effects {
				fmt.Fprintf(&b, " | %s", p.Decide(k, e, "", ""))
			}
			b.WriteString("\n")
		}
	}
	listed := false
	for what, m := range map[string]map[string]map[string]Decision{"tool": p.Tools, "MCP server": p.Servers} {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			keys := make([]string, 0, len(m[n]))
			for k := range m[n] {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, k+": "+string(m[n][k]))
			}
			if !listed {
				b.WriteString("\n")
				listed = true
			}
			fmt.Fprintf(&b, "- %s %s: %s\n", what, n, strings.Join(parts, ", "))
		}
	}
	return b.String()
}

// PolicyView is the table in force as JSON (GET /api/policy).
type PolicyView struct {
	Table   map[string]map[Effect]Decision `json:"table"`
	Tools   map[string]map[string]Decision `json:"tools"`
	Servers map[string]map[string]Decision `json:"servers"`
}

// View returns the table in force.
func (p *Policy) View() PolicyView {
	v := PolicyView{Table: map[string]map[Effect]Decision{}, Tools: p.Tools, Servers: p.Servers}
	for _, st := range Starters {
		for _, t := range []bool{false, true} {
			k := PolicyKey{st, t}
			row := map[Effect]Decision{}
			for _, e := range Effects {
				row[e] = p.Decide(k, e, "", "")
			}
			v.Table[k.String()] = row
		}
	}
	return v
}
