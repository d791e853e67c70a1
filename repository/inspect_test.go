package repository_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/metrics"
)

// inspectColumns is the shape of every named query of repository/inspect.sql,
// in file order: the appendix's three first, verbatim, then ours.
var inspectColumns = []struct {
	name    string
	columns string
}{
	{"recent_visible_messages", "id role source created_at substr"},
	{"summary_cursors", "scope until_message_id summary_len updated_at"},
	{"recent_runs", "id source status model started_at finished_at"},
	{"summary_cursor_lag", "timeline_scope scope until_message_id summary_len lag_messages lag_tokens updated_at cursor_age"},
	{"runs_per_day", "day status runs child_runs avg_budget avg_estimated avg_provider_prompt budget_use provider_per_estimate cached_tokens avg_seconds"},
	{"growth_per_day", "day visible_messages hidden_messages runs steps summary_segments cursors_moved"},
	{"child_runs_per_parent", "parent_run_id timeline_scope parent_status started_at children children_ok children_failed children_unfinished descendants max_depth descendant_prompt_tokens"},
	{"oldest_unfinished_run", "id timeline_scope context_scope parent_run_id status source model started_at heartbeat_at age since_heartbeat"},
}

// populate writes a small session: messages in two timelines, a main run
// that delegated to a finished child run in its own scope, an open run,
// steps, summary cursors and a segment, and a queued job.
func populate(t *testing.T, pool *pgxpool.Pool) (store *repository.Store, parent, child services.Run) {
	t.Helper()
	ctx := context.Background()
	store = repository.New(pool)
	var lastMain int64
	for i, m := range []services.NewMessage{
		{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "web", Content: "hello", Visible: true, TokenCount: 2},
		{TimelineScope: "global", ContextScope: "main", Role: "assistant", Source: "agent", Content: "hi", Visible: true, TokenCount: 1},
		{TimelineScope: "global", ContextScope: "main", Role: "user", Source: "telegram", Content: "research this", Visible: true, TokenCount: 3},
		{TimelineScope: "tg:42", ContextScope: "main", Role: "user", Source: "telegram", Content: "其他时间线", Visible: true, TokenCount: 4},
	} {
		msg, _, err := store.InsertMessage(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			lastMain = msg.ID
		}
	}
	var err error
	parent, err = store.CreateRun(ctx, services.NewRun{TimelineScope: "global", ContextScope: "main", Source: "web", Status: services.RunRunning, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	child, err = store.CreateRun(ctx, services.NewRun{TimelineScope: "global", ParentRunID: parent.ID, AgentID: "researcher", Source: "agent", Status: services.RunRunning, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Exec(t, pool, `UPDATE agent_runs SET context_scope = 'sub:researcher:' || id WHERE id = $1`, child.ID)
	if _, _, err := store.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", ContextScope: "sub:researcher:" + itoa(child.ID),
		AgentID: "researcher", Role: "tool", Source: "agent", Content: "raw tool output", TokenCount: 5}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		run  int64
		kind services.StepKind
	}{{parent.ID, "prompt"}, {parent.ID, "model_call"}, {child.ID, "model_call"}, {child.ID, "handoff"}} {
		if _, err := store.AppendStep(ctx, st.run, st.kind, json.RawMessage(`{"usage":{"PromptTokens":10}}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []services.Run{child, parent} {
		if _, err := store.FinishRun(ctx, r.ID, services.RunFinish{Status: services.RunOK, PromptTokenBudget: 1000,
			EstimatedPromptTokens: 400, ModelContextWindow: 8000, PromptTokens: 450, CompletionTokens: 20, CachedTokens: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.CreateRun(ctx, services.NewRun{TimelineScope: "global", Source: "web"}); err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"global", "main"} {
		if _, err := store.UpsertSummary(ctx, services.Summary{TimelineScope: "global", Scope: scope, UntilMessageID: lastMain, SummaryText: "they greeted"}); err != nil {
			t.Fatal(err)
		}
	}
	dbtest.Exec(t, pool, `INSERT INTO chat_summary_segments (timeline_scope, scope, from_message_id, until_message_id, summary_text) VALUES ('global', 'main', 1, $1, 'they greeted')`, lastMain)
	dbtest.Exec(t, pool, `INSERT INTO river_job (args, kind, max_attempts, queue) VALUES ('{}', 'turn', 5, 'turns')`)
	return store, parent, child
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestInspectQueriesShape runs every named query of the embedded script
// (the file psql runs) against a populated schema and checks its columns.
func TestInspectQueriesShape(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	store, parent, child := populate(t, pool)
	queries, err := repository.ParseInspectQueries(repository.InspectSQL)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range queries {
		names = append(names, q.Name)
	}
	var want []string
	for _, c := range inspectColumns {
		want = append(want, c.name)
	}
	// Tools (and TestInspectionQueriesRunVerbatim) split the file on
	// semicolons: one per query, none in comments.
	if n := strings.Count(repository.InspectSQL, ";"); n != len(queries) {
		t.Errorf("inspect.sql has %d semicolons for %d queries; keep them out of comments", n, len(queries))
	}
	if !slices.Equal(names, want) {
		t.Fatalf("queries %v, want %v (update inspectColumns with a new query)", names, want)
	}
	for i, q := range queries {
		if q.Description == "" {
			t.Errorf("%s has no description comment", q.Name)
		}
		res, err := store.Inspect(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		var cols []string
		for _, c := range res.Columns {
			cols = append(cols, c.Name)
		}
		if got := strings.Join(cols, " "); got != inspectColumns[i].columns {
			t.Errorf("%s columns:\n got %s\nwant %s", q.Name, got, inspectColumns[i].columns)
		}
		if len(res.Rows) == 0 {
			t.Errorf("%s returned no rows on a populated schema", q.Name)
		}
	}
	// Spot checks of the values.
	byName := map[string]repository.InspectQuery{}
	for _, q := range queries {
		byName[q.Name] = q
	}
	res, _ := store.Inspect(t.Context(), byName["child_runs_per_parent"])
	if r := res.Rows[len(res.Rows)-1]; r[0].Text != itoa(parent.ID) || r[4].Text != "1" || r[5].Text != "1" || res.Columns[4].Kind != repository.InspectNumber {
		t.Errorf("child_runs_per_parent first parent row %v (columns %v), want parent %d with 1 ok child", r, res.Columns, parent.ID)
	}
	res, _ = store.Inspect(t.Context(), byName["summary_cursor_lag"])
	lag := map[string]string{}
	for _, r := range res.Rows {
		lag[r[1].Text] = r[4].Text
	}
	if lag["global"] != "1" || lag["main"] != "1" {
		t.Errorf("cursor lag %v: want 1 visible message after the global cursor and 1 main row after the main one", lag)
	}
	res, _ = store.Inspect(t.Context(), byName["oldest_unfinished_run"])
	if len(res.Rows) != 1 || res.Rows[0][0].Text == itoa(child.ID) || !res.Rows[0][8].Null {
		t.Errorf("oldest unfinished run %v", res.Rows)
	}
}

// TestInspectIsReadOnly: a named query that writes fails and changes nothing.
func TestInspectIsReadOnly(t *testing.T) {
	t.Parallel()
	store := dbtest.Store(t)
	_, err := store.Inspect(t.Context(), repository.InspectQuery{Name: "bad", SQL: `INSERT INTO chat_messages (role, source, content) VALUES ('user', 'web', 'x')`})
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("write in inspect: %v", err)
	}
	msgs, err := store.ListTimeline(t.Context(), services.TimelineQuery{TimelineScope: "global", Limit: 10})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("rows after a refused write: %d %v", len(msgs), err)
	}
}

func TestParseInspectQueries(t *testing.T) {
	t.Parallel()
	qs, err := repository.ParseInspectQueries("-- header; ignored\n\n-- name: a_1\n-- first line\n--   second\nSELECT 1\n  AS x;\n-- between\n-- name: b\nSELECT 2;\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[0].Name != "a_1" || qs[0].Description != "first line second" || qs[0].SQL != "SELECT 1\n  AS x" || qs[1].SQL != "SELECT 2" {
		t.Fatalf("parsed %+v", qs)
	}
	for src, want := range map[string]string{
		"SELECT 1;":             "no \"-- name:\"",
		"-- name: a\nSELECT 1":  "no terminating semicolon",
		"-- name: a\n;":         "no statement",
		"-- name: A\nSELECT 1;": "bad query name",
		"-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;": "named twice",
		"-- name: a\nSELECT 1\n-- name: b\nSELECT 2;":  "before the next name",
	} {
		if _, err := repository.ParseInspectQueries(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

func FuzzParseInspectQueries(f *testing.F) {
	f.Add(repository.InspectSQL)
	f.Add("-- name: a\nSELECT 1;")
	f.Add("-- name: a\n-- d\n\nSELECT ';'\n;")
	f.Add("-- name: a\n00;;")
	f.Fuzz(func(t *testing.T, src string) {
		qs, err := repository.ParseInspectQueries(src)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, q := range qs {
			if q.SQL == "" || strings.HasSuffix(q.SQL, ";") || seen[q.Name] || q.Name == "" {
				t.Fatalf("bad query %+v", q)
			}
			seen[q.Name] = true
		}
	})
}

func TestMetricsSnapshotAndCursors(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	store, _, _ := populate(t, pool)
	snap, err := store.MetricsSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if snap.MessagesByChannel["telegram"] != 2 || snap.MessagesByChannel["web"] != 1 || snap.MessagesByChannel["agent"] != 1 {
		t.Errorf("messages by channel %v", snap.MessagesByChannel)
	}
	if len(snap.QueueJobs) != 1 || snap.QueueJobs[0] != (metrics.QueueJobs{Queue: "turns", State: "available", Jobs: 1}) {
		t.Errorf("queue jobs %+v", snap.QueueJobs)
	}
	if snap.UnfinishedRuns["queued"] != 1 || len(snap.UnfinishedRuns) != 1 || snap.OldestUnfinishedRun < 0 {
		t.Errorf("unfinished runs %v oldest %v", snap.UnfinishedRuns, snap.OldestUnfinishedRun)
	}
	cursors, err := store.SummaryCursors(t.Context(), "global")
	if err != nil || len(cursors) != 2 || cursors[0].Scope != "global" || cursors[0].LagMessages != 1 || cursors[1].LagTokens != 3 {
		t.Fatalf("cursors %+v %v", cursors, err)
	}
	if other, err := store.SummaryCursors(t.Context(), "tg:42"); err != nil || len(other) != 0 {
		t.Fatalf("cursors of another timeline %+v %v", other, err)
	}
}
