package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/localpg"
)

// fullCluster starts a private PostgreSQL with max_connections=30 and
// returns the URL of a database on it.
func fullCluster(t *testing.T) string {
	t.Helper()
	if _, err := localpg.FindBinDir(); err != nil {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	parent, err := os.MkdirTemp("", "switchboard-fullpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := localpg.Start(ctx, filepath.Join(parent, "data"), 0, "max_connections=30", "superuser_reserved_connections=0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	url, err := localpg.EnsureDatabase(ctx, c.URL("postgres"), "switchboard")
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// filler is another client holding every connection PostgreSQL has left.
type filler struct{ conns []*pgx.Conn }

// fill opens connections to url until PostgreSQL refuses one with
// too_many_connections.
func (f *filler) fill(t *testing.T, url string) {
	t.Helper()
	for range 100 {
		c, err := pgx.Connect(context.Background(), url+"&application_name=filler")
		if err != nil {
			if !repository.IsTooManyConnections(err) {
				t.Fatalf("filling the server: %v", err)
			}
			return
		}
		f.conns = append(f.conns, c)
	}
	t.Fatal("PostgreSQL accepted 100 connections with max_connections=30")
}

func (f *filler) release() {
	for _, c := range f.conns {
		_ = c.Close(context.Background())
	}
	f.conns = nil
}

// TestAPIAnswers503WhenPostgreSQLHasNoConnectionLeft: when other clients
// hold every connection PostgreSQL allows, a request that needs a new one
// gets 503 with Retry-After (SQLSTATE 53300 is the database being
// unavailable, as when it is stopped), never a 500; once connections free,
// the same request succeeds.
func TestAPIAnswers503WhenPostgreSQLHasNoConnectionLeft(t *testing.T) {
	if raceOn {
		t.Skip("under -race the instance retakes freed slots before the filler can (raceOn)")
	}
	url := fullCluster(t)
	in := apptest.Start(t, apptest.Options{DatabaseURL: url})
	var f filler
	t.Cleanup(f.release)
	// The instance's own connections go (as idle ones do after
	// repository.MaxConnIdle), and other clients take their places.
	f.fill(t, url)
	// Terminated backends free their slots asynchronously (the filler
	// takes each as it frees): the instance is out only when two checks
	// in a row, 50 ms apart, find none of its.
	var others, quiet int
	var err error
	out := pollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		if err = f.conns[0].QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND application_name <> 'filler'`).Scan(&others); err != nil {
			return true
		}
		if quiet = map[bool]int{true: quiet + 1, false: 0}[others == 0]; quiet == 2 {
			return true
		}
		f.fill(t, url)
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out {
		t.Fatalf("the instance keeps %d connections", others)
	}
	get := func() *http.Response {
		req, _ := http.NewRequest("GET", in.URL+"/api/timeline", nil)
		req.Header.Set("Authorization", "Bearer "+in.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for range 3 {
		resp := get()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("with PostgreSQL out of connections: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	f.release()
	var status int
	if !pollEvery(30*time.Second, 100*time.Millisecond, func() bool { status = get().StatusCode; return status == http.StatusOK }) {
		t.Fatalf("connections are free again but the API answers %d", status)
	}
}

// TestStartWaitsForAConnection: an instance starting while PostgreSQL
// refuses connections for having too many waits and tries again (logging
// it), and comes up once connections free, instead of exiting.
func TestStartWaitsForAConnection(t *testing.T) {
	// Its own PostgreSQL, none of the suite's connections: it waits out
	// its few seconds beside the other tests.
	t.Parallel()
	url := fullCluster(t)
	var f filler
	t.Cleanup(f.release)
	f.fill(t, url)
	done := make(chan error, 1)
	var a *app.App
	go func() {
		var err error
		a, err = app.New(context.Background(), app.Config{DatabaseURL: url, PoolSize: 12, OwnerToken: apptest.Token,
			WorkspaceDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), DBWait: time.Minute})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("New returned while PostgreSQL had no connection left: %v", err)
	case <-time.After(3 * time.Second): // why: proves New waits; a bubble cannot hold PostgreSQL
	}
	f.release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("New once connections freed: %v", err)
		}
		a.Close(context.Background())
	case <-time.After(time.Minute):
		t.Fatal("New did not come up within a minute of connections freeing")
	}

	// Bounded: with no connection ever freed, New gives up with the cause.
	f.fill(t, url)
	_, err := app.New(context.Background(), app.Config{DatabaseURL: url, PoolSize: 12, OwnerToken: apptest.Token,
		WorkspaceDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), DBWait: 2 * time.Second})
	if err == nil || !repository.IsTooManyConnections(err) {
		t.Fatalf("New with PostgreSQL full for longer than DBWait: %v; want the too_many_connections error", err)
	}
}
