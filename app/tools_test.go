package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services/fetch"
)

// TestBrokenToolFailsStart: a tool of the list (app/tools.go) that does not
// register stops New with its error, naming the tool; nothing is left
// running.
func TestBrokenToolFailsStart(t *testing.T) {
	t.Parallel()
	a, err := app.New(context.Background(), app.Config{
		DatabaseURL: apptest.FrugalURL(apptest.SchemaURL(t)), PoolSize: apptest.PoolSize,
		OwnerToken: apptest.Token, WorkspaceDir: t.TempDir(),
		Search: fetch.SearchOptions{URL: "ftp://search.invalid"},
	})
	if err == nil {
		a.Close(context.Background())
		t.Fatal("New built an instance whose web_search tool does not register")
	}
	if !strings.Contains(err.Error(), "web_search") || !strings.Contains(err.Error(), "SEARXNG_URL") {
		t.Fatalf("New: %v, want the tool and the setting named", err)
	}
}
