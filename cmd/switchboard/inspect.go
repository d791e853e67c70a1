package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"

	"github.com/switchboard/switchboard/repository"
)

const inspectUsage = `switchboard inspect [NAME...] [--json]

Runs the named queries of repository/inspect.sql (built into the binary) in a
read-only transaction and prints aligned tables, or JSON with --json.
Without a NAME every query runs, in the file's order. --list prints the
names and what each shows.`

// runInspect handles `switchboard inspect`. It never migrates or writes:
// the queries run in a READ ONLY transaction.
func runInspect(ctx context.Context, cfg *Config, log *slog.Logger, args []string, stdout io.Writer) error {
	queries, err := repository.ParseInspectQueries(repository.InspectSQL)
	if err != nil {
		return err
	}
	asJSON, list := false, false
	var names []string
	for _, a := range args {
		switch a {
		case "--json", "-json":
			asJSON = true
		case "--list", "-list":
			list = true
		case "-h", "--help", "help":
			fmt.Fprintln(stdout, inspectUsage)
			return nil
		default:
			if strings.HasPrefix(a, "-") {
				return fmt.Errorf("inspect: unknown flag %q (want --json or --list)", a)
			}
			names = append(names, a)
		}
	}
	selected, err := selectQueries(queries, names)
	if err != nil {
		return err
	}
	if list {
		for _, q := range queries {
			fmt.Fprintf(stdout, "%-26s %s\n", q.Name, q.Description)
		}
		return nil
	}
	pool, closeDB, err := openDatabase(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer closeDB()
	store := repository.New(pool)
	var results []repository.InspectResult
	for _, q := range selected {
		res, err := store.Inspect(ctx, q)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if len(names) == 1 {
			return enc.Encode(inspectJSON(results[0]))
		}
		all := make([]inspectOutput, 0, len(results))
		for _, r := range results {
			all = append(all, inspectJSON(r))
		}
		return enc.Encode(all)
	}
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeInspectTable(stdout, r)
	}
	return nil
}

// selectQueries returns the queries named (all when none), or an error
// listing the known names.
func selectQueries(queries []repository.InspectQuery, names []string) ([]repository.InspectQuery, error) {
	if len(names) == 0 {
		return queries, nil
	}
	byName := map[string]repository.InspectQuery{}
	var known []string
	for _, q := range queries {
		byName[q.Name] = q
		known = append(known, q.Name)
	}
	var out []repository.InspectQuery
	for _, n := range names {
		q, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("inspect: unknown query %q; the queries are: %s", n, strings.Join(known, ", "))
		}
		out = append(out, q)
	}
	return out, nil
}

// inspectOutput is one query's result as --json prints it: rows are objects
// keyed by column, numbers and booleans typed, NULL as null.
type inspectOutput struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Columns     []string          `json:"columns"`
	Rows        []json.RawMessage `json:"rows"`
}

func inspectJSON(r repository.InspectResult) inspectOutput {
	out := inspectOutput{Name: r.Query.Name, Description: r.Query.Description, Rows: []json.RawMessage{}}
	for _, c := range r.Columns {
		out.Columns = append(out.Columns, c.Name)
	}
	for _, row := range r.Rows {
		var b strings.Builder
		b.WriteByte('{')
		for i, v := range row {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(r.Columns[i].Name)
			b.Write(k)
			b.WriteByte(':')
			b.Write(jsonValue(r.Columns[i].Kind, v))
		}
		b.WriteByte('}')
		out.Rows = append(out.Rows, json.RawMessage(b.String()))
	}
	return out
}

func jsonValue(kind string, v repository.InspectValue) []byte {
	if v.Null {
		return []byte("null")
	}
	switch kind {
	case repository.InspectNumber:
		// NaN and Infinity are not JSON numbers; they stay strings.
		if _, err := strconv.ParseFloat(v.Text, 64); err == nil && !strings.ContainsAny(v.Text, "naNIi") {
			return []byte(v.Text)
		}
	case repository.InspectBool:
		if v.Text == "t" {
			return []byte("true")
		}
		return []byte("false")
	case repository.InspectJSON:
		if json.Valid([]byte(v.Text)) {
			return []byte(v.Text)
		}
	}
	b, _ := json.Marshal(v.Text)
	return b
}

// writeInspectTable prints a result like psql's aligned format, measuring
// cells by display width (CJK text takes two columns).
func writeInspectTable(w io.Writer, r repository.InspectResult) {
	fmt.Fprintf(w, "== %s\n", r.Query.Name)
	if r.Query.Description != "" {
		fmt.Fprintf(w, "   %s\n", r.Query.Description)
	}
	cells := make([][]string, len(r.Rows))
	widths := make([]int, len(r.Columns))
	for i, c := range r.Columns {
		widths[i] = runewidth.StringWidth(c.Name)
	}
	for i, row := range r.Rows {
		cells[i] = make([]string, len(row))
		for j, v := range row {
			s := v.Text
			if v.Null {
				s = ""
			}
			s = strings.NewReplacer("\r\n", " ↵ ", "\n", " ↵ ", "\t", " ").Replace(s)
			cells[i][j] = s
			widths[j] = max(widths[j], runewidth.StringWidth(s))
		}
	}
	pad := func(s string, width int, right bool) string {
		gap := strings.Repeat(" ", width-runewidth.StringWidth(s))
		if right {
			return gap + s
		}
		return s + gap
	}
	var line strings.Builder
	for i, c := range r.Columns {
		if i > 0 {
			line.WriteString(" | ")
		}
		line.WriteString(pad(c.Name, widths[i], false))
	}
	fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	line.Reset()
	for i := range r.Columns {
		if i > 0 {
			line.WriteString("-+-")
		}
		line.WriteString(strings.Repeat("-", widths[i]))
	}
	fmt.Fprintln(w, line.String())
	for _, row := range cells {
		line.Reset()
		for j, s := range row {
			if j > 0 {
				line.WriteString(" | ")
			}
			line.WriteString(pad(s, widths[j], r.Columns[j].Kind == repository.InspectNumber))
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
	if len(r.Rows) == 1 {
		fmt.Fprintln(w, "(1 row)")
	} else {
		fmt.Fprintf(w, "(%d rows)\n", len(r.Rows))
	}
}
