package repository_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

func auditEntry(i int) services.AuditEntry {
	return services.AuditEntry{Actor: "owner", Channel: "web", Action: services.AuditRuleChange, Subject: fmt.Sprintf("rule:%d", i),
		TimelineScope: "global", Status: "ok", Detail: json.RawMessage(fmt.Sprintf(`{ "text": "rule %d",  "hard": true }`, i))}
}

// asSuperuser runs sql on one connection with row triggers off, as someone
// with the rights to bypass audit_log's append-only trigger would.
func asSuperuser(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAuditAppendListVerify: rows chain from the genesis hash, list by time
// oldest first and page newest first, verify whole; the product cannot
// update or delete a row; a bad entry is refused.
func TestAuditAppendListVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	if n, broken, err := s.VerifyAudit(ctx); err != nil || n != 0 || broken != nil {
		t.Fatalf("empty chain: %d %+v %v", n, broken, err)
	}
	var got []services.AuditEntry
	for i := range 3 {
		e, err := s.AppendAudit(ctx, auditEntry(i))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if got[0].PrevHash != services.AuditGenesis || got[1].PrevHash != got[0].Hash || got[2].PrevHash != got[1].Hash {
		t.Fatalf("chain links: %+v", got)
	}
	if string(got[0].Detail) != `{"hard": true, "text": "rule 0"}` || got[0].Hash != services.AuditHash(got[0]) {
		t.Fatalf("stored detail %s, hash %s vs %s", got[0].Detail, got[0].Hash, services.AuditHash(got[0]))
	}
	if got[0].At.IsZero() || got[2].At.Before(got[0].At) {
		t.Fatalf("times: %v %v", got[0].At, got[2].At)
	}
	all, err := s.ListAudit(ctx, time.Time{}, 0)
	if err != nil || len(all) != 3 || all[0].ID != got[0].ID || all[2].Hash != got[2].Hash || all[1].Subject != "rule:1" {
		t.Fatalf("list: %+v %v", all, err)
	}
	if two, _ := s.ListAudit(ctx, time.Time{}, 2); len(two) != 2 || two[1].ID != got[1].ID {
		t.Fatalf("list limit 2: %+v", two)
	}
	if since, _ := s.ListAudit(ctx, got[2].At, 0); len(since) != 1 || since[0].ID != got[2].ID {
		t.Fatalf("list since the last row's time: %+v", since)
	}
	page, err := s.AuditPage(ctx, 0, 2)
	if err != nil || len(page) != 2 || page[0].ID != got[2].ID || page[1].ID != got[1].ID {
		t.Fatalf("first page: %+v %v", page, err)
	}
	if page, _ = s.AuditPage(ctx, page[1].ID, 2); len(page) != 1 || page[0].ID != got[0].ID {
		t.Fatalf("second page: %+v", page)
	}
	v, err := s.VerifyAuditChain(ctx)
	if err != nil || v.Checked != 3 || v.Broken != nil || v.Head != got[2].Hash {
		t.Fatalf("verify: %+v %v", v, err)
	}
	for _, bad := range []services.AuditEntry{{Action: services.AuditLogin}, {Actor: "owner"}, {Actor: "owner", Action: "login", Detail: json.RawMessage(`{`)}} {
		if _, err := s.AppendAudit(ctx, bad); !services.IsKind(err, services.EINVALID) {
			t.Fatalf("append %+v: %v", bad, err)
		}
	}
}

// TestAuditRowsCannotBeChanged: UPDATE, DELETE and TRUNCATE of audit_log
// fail for the product's own statements.
func TestAuditRowsCannotBeChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	s := repository.New(pool)
	e, err := s.AppendAudit(ctx, auditEntry(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{`UPDATE audit_log SET status = 'error' WHERE id = $1`, `DELETE FROM audit_log WHERE id = $1`, `TRUNCATE audit_log`} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, e.ID)
		}
		if _, err := pool.Exec(ctx, sql, args...); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if n, broken, err := s.VerifyAudit(ctx); n != 1 || broken != nil || err != nil {
		t.Fatalf("verify: %d %+v %v", n, broken, err)
	}
}

// TestAuditConcurrentAppendsKeepOneChain: appends from many goroutines on
// two pools (two instances) make one chain without a fork or a gap.
func TestAuditConcurrentAppendsKeepOneChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := dbtest.Schema(t)
	other := dbtest.PoolFor(t, dbtest.SchemaURL(dbtest.URL(t), schema))
	stores := []*repository.Store{repository.New(pool), repository.New(other)}
	const workers, each = 12, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := stores[w%2].AppendAudit(ctx, auditEntry(w*100+i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, err := stores[0].VerifyAuditChain(ctx)
	if err != nil || v.Checked != workers*each || v.Broken != nil {
		t.Fatalf("verify after concurrent appends: %+v %v", v, err)
	}
	var forks int
	if err := pool.QueryRow(ctx, `SELECT count(*) - count(DISTINCT prev_hash) FROM audit_log`).Scan(&forks); err != nil || forks != 0 {
		t.Fatalf("rows sharing a predecessor: %d %v", forks, err)
	}
}

// TestAuditVerifyNamesTheAlteredRow: a row's detail changed by SQL (as a
// superuser, past the trigger) is the row verify reports; recomputing that
// row's hash moves the break to the next row; a deleted row breaks the link
// of the row after it; a rolled-back append leaves no trace.
func TestAuditVerifyNamesTheAlteredRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	s := repository.New(pool)
	var rows []services.AuditEntry
	for i := range 6 {
		e, err := s.AppendAudit(ctx, auditEntry(i))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, e)
	}
	// A rolled-back append (AppendAuditTx in the caller's transaction).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repository.AppendAuditTx(ctx, tx, auditEntry(99)); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	if n, broken, err := s.VerifyAudit(ctx); n != 6 || broken != nil || err != nil {
		t.Fatalf("verify before tampering: %d %+v %v", n, broken, err)
	}

	asSuperuser(t, pool, `UPDATE audit_log SET detail = '{"hard": false, "text": "rule 2"}' WHERE id = $1`, rows[2].ID)
	v, err := s.VerifyAuditChain(ctx)
	if err != nil || v.Broken == nil || v.Broken.ID != rows[2].ID || v.Checked != 2 || !strings.Contains(v.Reason, "altered") {
		t.Fatalf("verify after altering row %d: %+v %v", rows[2].ID, v, err)
	}

	// The forger recomputes the altered row's hash: the next row's link breaks.
	altered := *v.Broken
	asSuperuser(t, pool, `UPDATE audit_log SET hash = $2 WHERE id = $1`, altered.ID, services.AuditHash(altered))
	v, _ = s.VerifyAuditChain(ctx)
	if v.Broken == nil || v.Broken.ID != rows[3].ID || v.Checked != 3 || !strings.Contains(v.Reason, "prev_hash") {
		t.Fatalf("verify after rehashing row %d: %+v", altered.ID, v)
	}

	// Put row 2 back, delete row 4: row 5 is reported.
	asSuperuser(t, pool, `UPDATE audit_log SET detail = $2::jsonb, hash = $3 WHERE id = $1`, rows[2].ID, string(rows[2].Detail), rows[2].Hash)
	asSuperuser(t, pool, `DELETE FROM audit_log WHERE id = $1`, rows[4].ID)
	v, _ = s.VerifyAuditChain(ctx)
	if v.Broken == nil || v.Broken.ID != rows[5].ID || v.Checked != 4 {
		t.Fatalf("verify after deleting row %d: %+v", rows[4].ID, v)
	}
}
