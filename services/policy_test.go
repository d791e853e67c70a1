package services_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func TestDefaultPolicy(t *testing.T) {
	p := services.DefaultPolicy()
	cases := []struct {
		k    services.PolicyKey
		e    services.Effect
		want services.Decision
	}{
		{services.PolicyKey{Starter: services.StarterOwner}, services.EffectEgress, services.Allow},
		{services.PolicyKey{Starter: services.StarterOwner}, services.EffectExec, services.Allow},
		{services.PolicyKey{Starter: services.StarterOwner, Tainted: true}, services.EffectPersist, services.Ask},
		{services.PolicyKey{Starter: services.StarterOwner, Tainted: true}, services.EffectRead, services.Allow},
		{services.PolicyKey{Starter: services.StarterStranger, Tainted: true}, services.EffectEgress, services.Deny},
		{services.PolicyKey{Starter: services.StarterSchedule}, services.EffectExec, services.Deny},
		{services.PolicyKey{Starter: services.StarterSchedule, Tainted: true}, services.EffectExternal, services.Ask},
	}
	for _, c := range cases {
		if got := p.Decide(c.k, c.e, "x", ""); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.k, c.e, got, c.want)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := services.ParsePolicy(`{"table":{"owner/tainted":{"egress":"allow"},"schedule":{"exec":"allow"}},"tools":{"web_search":{"tainted":"deny"}},"servers":{"gh":{"*":"ask"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	tainted := services.PolicyKey{Starter: services.StarterOwner, Tainted: true}
	if d := p.Decide(tainted, services.EffectEgress, "fetch_url", ""); d != services.Allow {
		t.Errorf("owner/tainted egress: %s", d)
	}
	if d := p.Decide(tainted, services.EffectEgress, "web_search", ""); d != services.Deny {
		t.Errorf("web_search override: %s", d)
	}
	if d := p.Decide(services.PolicyKey{Starter: services.StarterOwner}, services.EffectExternal, "issue", "gh"); d != services.Ask {
		t.Errorf("server override: %s", d)
	}
	if d := p.Decide(services.PolicyKey{Starter: services.StarterSchedule}, services.EffectExec, "exec", ""); d != services.Allow {
		t.Errorf("schedule exec grant: %s", d)
	}
	// A stranger never gets more than read and workspace.
	q, _ := services.ParsePolicy(`{"tools":{"remember":{"*":"allow"}}}`)
	if d := q.Decide(services.PolicyKey{Starter: services.StarterStranger, Tainted: true}, services.EffectPersist, "remember", ""); d != services.Deny {
		t.Errorf("stranger remember: %s", d)
	}
	for in, want := range map[string]string{
		`{"table":{"boss":{"egress":"allow"}}}`:    `unknown cell "boss"`,
		`{"table":{"owner":{"teleport":"allow"}}}`: `unknown effect class "teleport"`,
		`{"table":{"owner":{"egress":"maybe"}}}`:   `unknown decision "maybe"`,
		`{"rules":{}}`:                             `unknown field "rules"`,
		`/no/such/policy.json`:                     `not a JSON object and not a readable file`,
	} {
		if _, err := services.ParsePolicy(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePolicy(%s): %v, want %q", in, err, want)
		}
	}
}

func TestSecrets(t *testing.T) {
	s := services.NewSecrets("sk-test-0123456789", "short")
	if !s.Contains(`{"url":"http://x/?k=sk-test-0123456789"}`) || !s.Contains("sk%2Dtest-0123456789") {
		t.Error("secret not found")
	}
	if s.Contains("short text") {
		t.Error("a value under 8 characters is not a secret")
	}
	if got := s.Mask("key sk-test-0123456789 end"); got != "key [secret] end" {
		t.Errorf("mask: %q", got)
	}
}
