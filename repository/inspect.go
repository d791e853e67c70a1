package repository

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// InspectSQL is repository/inspect.sql: the inspection queries, each
// introduced by a "-- name: NAME" comment line. `switchboard inspect` and
// `psql -f repository/inspect.sql` run the same text.
//
//go:embed inspect.sql
var InspectSQL string

// InspectQuery is one named query of repository/inspect.sql.
type InspectQuery struct {
	Name string
	// Description is the comment under the name line, joined into one text.
	Description string
	// SQL is the statement without its terminating semicolon.
	SQL string
}

// ParseInspectQueries splits an inspection script into its named queries.
// A query starts at a "-- name: NAME" line; the comment lines right after it
// are its description, and the statement runs to the first line ending in a
// semicolon. Text before the first name line (the script's header) and
// comments between queries are ignored. Names are unique, non-empty and
// made of lowercase letters, digits and underscores.
func ParseInspectQueries(src string) ([]InspectQuery, error) {
	var out []InspectQuery
	seen := map[string]bool{}
	var cur *InspectQuery
	var body []string
	inDesc := false
	finish := func() error {
		if cur == nil {
			return nil
		}
		sql := strings.TrimSpace(strings.Join(body, "\n"))
		if sql == "" {
			return fmt.Errorf("inspect: query %q has no statement", cur.Name)
		}
		cur.SQL = sql
		out = append(out, *cur)
		cur, body = nil, nil
		return nil
	}
	for n, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trimmed, "-- name:"); ok {
			if cur != nil {
				return nil, fmt.Errorf("inspect: line %d: query %q has no terminating semicolon before the next name", n+1, cur.Name)
			}
			name = strings.TrimSpace(name)
			if !validInspectName(name) {
				return nil, fmt.Errorf("inspect: line %d: bad query name %q (want lowercase letters, digits and _)", n+1, name)
			}
			if seen[name] {
				return nil, fmt.Errorf("inspect: line %d: query %q is named twice", n+1, name)
			}
			seen[name] = true
			cur, inDesc = &InspectQuery{Name: name}, true
			continue
		}
		if cur == nil {
			continue
		}
		if inDesc {
			if c, ok := strings.CutPrefix(trimmed, "--"); ok {
				cur.Description = strings.TrimSpace(cur.Description + " " + strings.TrimSpace(c))
				continue
			}
			inDesc = false
		}
		if strings.HasPrefix(trimmed, "--") || (trimmed == "" && len(body) == 0) {
			continue
		}
		if stmt, ok := strings.CutSuffix(strings.TrimRight(line, " \t\r"), ";"); ok {
			body = append(body, strings.TrimRight(stmt, "; \t"))
			if err := finish(); err != nil {
				return nil, err
			}
			continue
		}
		body = append(body, line)
	}
	if cur != nil {
		return nil, fmt.Errorf("inspect: query %q has no terminating semicolon", cur.Name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("inspect: no \"-- name:\" queries found")
	}
	return out, nil
}

func validInspectName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// Column kinds of an InspectResult, from the column's PostgreSQL type.
const (
	InspectText   = "text"
	InspectNumber = "number"
	InspectBool   = "bool"
	InspectJSON   = "json"
)

// InspectColumn is one result column: its name and how to render it.
type InspectColumn struct {
	Name string
	Kind string
}

// InspectValue is one cell as PostgreSQL's text output shows it (what psql
// prints); Null marks SQL NULL.
type InspectValue struct {
	Text string
	Null bool
}

// InspectResult is the result of one named query.
type InspectResult struct {
	Query   InspectQuery
	Columns []InspectColumn
	Rows    [][]InspectValue
}

// Inspect runs one named query in a read-only transaction with a statement
// timeout, returning every cell in PostgreSQL's text form. A query that
// tries to write fails (SQLSTATE 25006) and changes nothing.
func (s *Store) Inspect(ctx context.Context, q InspectQuery) (InspectResult, error) {
	res := InspectResult{Query: q}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return res, wrapErr("inspect: begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION READ ONLY`); err != nil {
		return res, wrapErr("inspect: read only", err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = '60s'`); err != nil {
		return res, wrapErr("inspect: statement timeout", err)
	}
	rows, err := tx.Query(ctx, q.SQL, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return res, fmt.Errorf("inspect %s: %w", q.Name, err)
	}
	defer rows.Close()
	for _, f := range rows.FieldDescriptions() {
		res.Columns = append(res.Columns, InspectColumn{Name: f.Name, Kind: inspectKind(f.DataTypeOID)})
	}
	for rows.Next() {
		raw := rows.RawValues()
		row := make([]InspectValue, len(raw))
		for i, b := range raw {
			if b == nil {
				row[i] = InspectValue{Null: true}
				continue
			}
			row[i] = InspectValue{Text: string(b)}
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("inspect %s: %w", q.Name, err)
	}
	return res, nil
}

// inspectKind maps a type OID to a column kind (pg_type's fixed OIDs).
func inspectKind(oid uint32) string {
	switch oid {
	case 20, 21, 23, 26, 700, 701, 1700: // int8, int2, int4, oid, float4, float8, numeric
		return InspectNumber
	case 16:
		return InspectBool
	case 114, 3802:
		return InspectJSON
	}
	return InspectText
}
