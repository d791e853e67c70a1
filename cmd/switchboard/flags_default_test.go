package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
)

// TestFlagsByDatabase: with the rollout flag variables unset, a database
// this version creates runs scoped with sub-agents, and one upgraded with
// conversations from before scopes keeps the legacy mode; the owner sees
// which mode runs and why, and set variables win.
func TestFlagsByDatabase(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	const owner = "owner-token-for-flags-default"
	flags := func(t *testing.T, base string) map[string]string {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/debug/flags", nil)
		req.Header.Set("Authorization", "Bearer "+owner)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Flags map[string]string `json:"flags"`
		}
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&body) != nil {
			t.Fatalf("debug flags: %d", resp.StatusCode)
		}
		return body.Flags
	}
	legacyDB := func(t *testing.T) string {
		pool, schema := dbtest.EmptySchema(t)
		m, err := repository.NewMigrator(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.UpTo(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		dbtest.Exec(t, pool, `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'telegram', 'legacy question')`)
		return apptest.FrugalURL(dbtest.SchemaURL(dbtest.URL(t), schema))
	}

	t.Run("new database", func(t *testing.T) {
		t.Parallel()
		f := flags(t, startServe(t, bin, freshDB(t), "WEB_AUTH_TOKEN="+owner))
		if f["mode"] != "scoped" || f["AGENT_SUBAGENTS"] != "1" || !strings.Contains(f["origin"], "database this version created") {
			t.Fatalf("a new database runs %v; want scoped with sub-agents, saying why", f)
		}
	})
	t.Run("upgraded legacy database", func(t *testing.T) {
		t.Parallel()
		f := flags(t, startServe(t, bin, legacyDB(t), "WEB_AUTH_TOKEN="+owner))
		if f["mode"] != "legacy" || !strings.Contains(f["origin"], "AGENT_CONTEXT_SCOPED_WRITE=1") {
			t.Fatalf("an upgraded legacy database runs %v; want legacy, naming the variable to set", f)
		}
	})
	t.Run("variables win", func(t *testing.T) {
		t.Parallel()
		f := flags(t, startServe(t, bin, freshDB(t), "WEB_AUTH_TOKEN="+owner, "AGENT_CONTEXT_SCOPED_WRITE=0", "AGENT_CONTEXT_SCOPED_READ=0"))
		if f["mode"] != "legacy" || !strings.Contains(f["origin"], "set by") {
			t.Fatalf("explicit 0/0 on a new database runs %v; want legacy, set by the variables", f)
		}
	})
}
