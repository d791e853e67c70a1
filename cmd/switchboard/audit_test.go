package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// TestAuditCommandThroughTheBinary: a token reset and a pairing approval
// through the real binary each leave an audit row (the token never in it);
// `audit` lists them as a table and as JSON; `audit verify` says ok, then,
// after one row's detail is altered by SQL past the append-only trigger,
// names that row and exits non-zero.
func TestAuditCommandThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)
	db := migratedDB(t)
	sb := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+db, "DATA_DIR="+t.TempDir(), "WEB_AUTH_TOKEN=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := sb("audit", "verify")
	if err != nil || !strings.Contains(out, "ok, 0 entries") {
		t.Fatalf("verify of an empty trail: %v\n%s", err, out)
	}
	out, err = sb("token", "reset")
	m := newTokenRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("token reset: %v\n%s", err, out)
	}
	tok := m[1]
	pool := dbtest.PoolFor(t, db)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO telegram_pairings (user_id, chat_id, display_name, code, timeline_scope, expires_at)
		VALUES (42, 42, 'Ann', 'ABC234', 'tg:42', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if out, err = sb("pair", "approve", "abc234"); err != nil {
		t.Fatalf("pair approve: %v\n%s", err, out)
	}

	out, err = sb("audit")
	if err != nil || !strings.Contains(out, "token_reset") || !strings.Contains(out, "pairing") || !strings.Contains(out, "ACTION") || strings.Contains(out, tok) {
		t.Fatalf("audit table: %v\n%s", err, out)
	}
	out, err = sb("audit", "--since", "1h", "--json")
	var rows []services.AuditEntry
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 {
		t.Fatalf("audit --json: %v\n%s", err, out)
	}
	if rows[0].Action != services.AuditTokenReset || rows[0].Channel != "cli" || rows[0].Actor != "owner" ||
		rows[1].Action != services.AuditPairing || rows[1].Status != "approved" || rows[1].Subject != "telegram user 42" || rows[1].PrevHash != rows[0].Hash {
		t.Fatalf("audit rows: %+v", rows)
	}
	if strings.Contains(out, tok) || strings.Contains(strings.ToUpper(out), "ABC234") {
		t.Fatalf("a secret in the audit trail:\n%s", out)
	}
	if out, err = sb("audit", "verify"); err != nil || !strings.Contains(out, "ok, 2 entries") {
		t.Fatalf("verify: %v\n%s", err, out)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{`SET LOCAL session_replication_role = replica`, `UPDATE audit_log SET detail = '{"sessions_ended": false}' WHERE action = 'token_reset'`} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	out, err = sb("audit", "verify")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(out, "broken at row 1 ") || !strings.Contains(out, "altered") {
		t.Fatalf("verify after altering row 1: %v\n%s", err, out)
	}
}

func TestAuditArgs(t *testing.T) {
	ctx := context.Background()
	var out, errOut strings.Builder
	for args, want := range map[string]string{
		"audit --since":           "--since needs a duration",
		"audit --since yesterday": `--since "yesterday" is not a positive duration`,
		"audit --since -5m":       `--since "-5m" is not a positive duration`,
		"audit sideways":          `unknown argument "sideways"`,
		"audit verify --since 1h": "--since is for listing",
	} {
		if err := run(ctx, strings.Fields(args), env(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", args, err, want)
		}
	}
	for v, want := range map[string]string{"90m": "1h30m0s", "7d": "168h0m0s", "12h": "12h0m0s"} {
		if d, err := parseSince(v); err != nil || d.String() != want {
			t.Errorf("parseSince(%q) = %v, %v; want %s", v, d, err, want)
		}
	}
	out.Reset()
	if err := run(ctx, []string{"help"}, env(nil), &out, &errOut); err != nil || !strings.Contains(out.String(), "switchboard audit verify") {
		t.Fatalf("help does not name audit verify: %v", err)
	}
}
