// Package scratch gives the load scripts (scripts/soak, scripts/turncost) a
// fresh schema of their own on a PostgreSQL server, dropped at the end.
package scratch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/repository/localpg"
)

// Schema is a fresh schema on a server, for one run of a script.
type Schema struct {
	// Name is the schema's name (prefix_<random hex>).
	Name string
	// URL is the server's URL with search_path set to the schema: what the
	// service under test gets as DATABASE_URL.
	URL string
	// Admin is a connection to the server, not bound to the schema.
	Admin *pgx.Conn
}

// New creates the schema prefix_<random> on server; with server empty, on
// the local PostgreSQL's database switchboard_soak (created if missing).
func New(ctx context.Context, server, prefix string) (*Schema, error) {
	if server == "" {
		var err error
		if server, err = localpg.EnsureDatabase(ctx, localpg.DefaultServerURL, "switchboard_soak"); err != nil {
			return nil, fmt.Errorf("no PostgreSQL (set TEST_DATABASE_URL or -db): %w", err)
		}
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	name := prefix + "_" + hex.EncodeToString(rb[:])
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		admin.Close(context.Background())
		return nil, err
	}
	sep := "?"
	if strings.Contains(server, "?") {
		sep = "&"
	}
	return &Schema{Name: name, URL: server + sep + "search_path=" + name, Admin: admin}, nil
}

// Drop drops the schema with everything in it and closes Admin.
func (s *Schema) Drop() {
	_, _ = s.Admin.Exec(context.Background(), "DROP SCHEMA "+s.Name+" CASCADE")
	_ = s.Admin.Close(context.Background())
}
