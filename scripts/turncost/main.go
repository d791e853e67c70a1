// Command turncost measures what a timeline's data costs per turn: it runs
// N turns (a question posted on the web API, answered by the fake model)
// through a real `switchboard serve` on a fresh schema and prints, per
// table, the rows and bytes (pg_total_relation_size: heap, indexes and
// TOAST) added, in all and per turn.
//
//	go run ./scripts/turncost                    200 turns of ~120-character questions
//	go run ./scripts/turncost -turns 500 -size 400
//
// It builds the binary, starts the fake model in-process (llmtest echo:
// the answer repeats the question), makes a fresh schema in the test
// database (TEST_DATABASE_URL, else PostgreSQL on 127.0.0.1:5432), runs
// VACUUM ANALYZE before each reading (so dead rows and the free space map
// settle) and drops the schema at the end.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/repository/localpg"
	"github.com/switchboard/switchboard/scripts/internal/scratch"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func main() {
	turns := flag.Int("turns", 200, "turns to run (one question and its answer each)")
	size := flag.Int("size", 120, "characters per question (the echo answer is as long plus 6)")
	dbURL := flag.String("db", os.Getenv("TEST_DATABASE_URL"), "PostgreSQL server URL (default: 127.0.0.1:5432)")
	private := flag.Bool("private", true, "run on a private cluster of its own (from the installed binaries), so the server-wide counters (transactions, WAL) are this run's alone")
	flag.IntVar(&toolCalls, "tools", 0, "tool calls per turn: the fake model calls list_files this many times (one call per model call) before answering")
	flag.BoolVar(&whyWrites, "writes", false, "with -private: log every statement during the measured turns and print the write transactions per turn grouped by their statements")
	flag.Parse()
	if err := run(context.Background(), *turns, *size, *dbURL, *private); err != nil {
		fmt.Fprintln(os.Stderr, "turncost:", err)
		os.Exit(1)
	}
}

// toolCalls per turn (-tools).
var toolCalls int

// whyWrites: group the write transactions by what they did (-writes).
var whyWrites bool

type tableSize struct {
	rows  int64
	bytes int64
}

func run(ctx context.Context, turns, size int, server string, private bool) error {
	tmp, err := os.MkdirTemp("", "switchboard-turncost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	_ = os.Chmod(tmp, 0o755) // the cluster may run as the postgres user
	var cluster *localpg.Cluster
	if private {
		cluster, err = localpg.Start(ctx, filepath.Join(tmp, "pg"), 0)
		if err != nil {
			return err
		}
		defer func() { _ = cluster.Stop() }()
		if server, err = localpg.EnsureDatabase(ctx, cluster.URL("postgres"), "switchboard"); err != nil {
			return err
		}
	}
	bin := filepath.Join(tmp, "switchboard")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/switchboard").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	scr, err := scratch.New(ctx, server, "turncost")
	if err != nil {
		return err
	}
	defer scr.Drop()
	admin, schema := scr.Admin, scr.Name
	model, err := llmtest.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer model.Close()
	if toolCalls > 0 {
		// Count the tool results since the last user message: call
		// list_files until there are toolCalls of them, then echo.
		model.SetDefault(func(r llmtest.Request) llmtest.Reply {
			var body struct {
				Messages []struct {
					Role string `json:"role"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(r.Body, &body)
			n := 0
			for i := len(body.Messages) - 1; i >= 0 && body.Messages[i].Role != "user"; i-- {
				if body.Messages[i].Role == "tool" {
					n++
				}
			}
			if n < toolCalls {
				return llmtest.Call("list_files", `{}`)
			}
			return llmtest.Text("done after the tools")
		})
	}
	token := "turncost-token-" + schema
	base, stopServe, err := serve(bin, tmp, scr.URL, model.OpenAIBaseURL(), token)
	if err != nil {
		return err
	}
	defer stopServe()

	// One warm-up turn, so the first turn's one-time rows (summary cursors,
	// the queue's bookkeeping) are not counted per turn.
	p := poster{httpc: &http.Client{Timeout: 30 * time.Second}, base: base, token: token, size: size}
	if err := p.turn(ctx, "warm-up", 0); err != nil {
		return err
	}
	before, err := measure(ctx, admin, schema)
	if err != nil {
		return err
	}
	sBefore, err := serverStats(ctx, admin)
	if err != nil {
		return err
	}
	if whyWrites && cluster != nil {
		if err := logStatements(ctx, admin, true); err != nil {
			return err
		}
	}
	started := time.Now()
	for i := 1; i <= turns; i++ {
		if err := p.turn(ctx, fmt.Sprint("q", i), i); err != nil {
			return err
		}
	}
	took := time.Since(started)
	time.Sleep(2 * time.Second) // deliveries and job completion after the answer
	if whyWrites && cluster != nil {
		if err := logStatements(ctx, admin, false); err != nil {
			return err
		}
		defer func() { printWrites(filepath.Join(cluster.DataDir, "server.log"), turns) }()
	}
	sAfter, err := serverStats(ctx, admin)
	if err != nil {
		return err
	}
	after, err := measure(ctx, admin, schema)
	if err != nil {
		return err
	}
	fmt.Printf("%d turns of %d-character questions in %s (one at a time)\n\n", turns, size, took.Round(time.Millisecond))
	printTables(before, after, turns)
	if private {
		fmt.Printf("\nserver-wide, per turn (the whole database, the service's idle polling included):\n")
		fmt.Printf("  commits %.1f (of which write transactions %.1f), rollbacks %.1f, rows inserted %.1f, updated %.1f, deleted %.1f, WAL %.0f bytes; %.1f turns/s\n",
			per(sAfter.commits-sBefore.commits, turns), per(sAfter.xid-sBefore.xid-1, turns), per(sAfter.rollbacks-sBefore.rollbacks, turns),
			per(sAfter.inserted-sBefore.inserted, turns), per(sAfter.updated-sBefore.updated, turns),
			per(sAfter.deleted-sBefore.deleted, turns), per(sAfter.wal-sBefore.wal, turns), float64(turns)/took.Seconds())
	}
	return nil
}

// serve starts `switchboard serve` against dbURL and the fake model and
// returns its base URL and a function that stops it.
func serve(bin, tmp, dbURL, modelURL, token string) (string, func(), error) {
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "HTTP_ADDR=127.0.0.1:0",
		"WEB_AUTH_TOKEN="+token, "LOG_LEVEL=warn", "DATA_DIR="+filepath.Join(tmp, "data"), "RATE_LIMIT_PER_MINUTE=0",
		"LLM_PROVIDER=openai", "LLM_BASE_URL="+modelURL, "LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=turncost")
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return m[1], stop, nil
		}
	}
	stop()
	return "", nil, errors.New("serve exited before listening")
}

// printTables prints each table's growth between before and after, per turn.
func printTables(before, after map[string]tableSize, turns int) {
	var names []string
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("| table | rows before | rows after | rows/turn | bytes before | bytes after | bytes/turn |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var tr, tb int64
	for _, n := range names {
		b, a := before[n], after[n]
		if a.rows == b.rows && a.bytes == b.bytes {
			continue
		}
		tr += a.rows - b.rows
		tb += a.bytes - b.bytes
		fmt.Printf("| %s | %d | %d | %.2f | %d | %d | %.0f |\n", n, b.rows, a.rows, float64(a.rows-b.rows)/float64(turns),
			b.bytes, a.bytes, float64(a.bytes-b.bytes)/float64(turns))
	}
	fmt.Printf("| **all** | | | %.2f | | | %.0f |\n", float64(tr)/float64(turns), float64(tb)/float64(turns))
}

// poster posts questions of size characters to one server as the owner.
type poster struct {
	httpc       *http.Client
	base, token string
	size        int
}

// turn posts one question and waits for the agent's answer to it.
func (p poster) turn(ctx context.Context, key string, i int) error {
	httpc, base, token := p.httpc, p.base, p.token
	content := fmt.Sprintf("question %d: ", i)
	for len(content) < p.size {
		content += "lorem ipsum dolor sit amet "
	}
	content = content[:p.size]
	body, _ := json.Marshal(map[string]string{"content": content, "client_key": key})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	var posted struct {
		Message struct{ ID int64 } `json:"message"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&posted)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		return fmt.Errorf("post %d: status %d", i, resp.StatusCode)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/timeline?after=%d&limit=50", base, posted.Message.ID), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		var page struct {
			Messages []struct {
				Metadata struct {
					ReplyTo int64 `json:"reply_to"`
				} `json:"metadata"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		for _, m := range page.Messages {
			if m.Metadata.ReplyTo == posted.Message.ID {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("question %d got no answer within 30s", i)
}

// measure returns rows and total bytes of every table in schema.
func measure(ctx context.Context, db *pgx.Conn, schema string) (map[string]tableSize, error) {
	rows, err := db.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1`, schema)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := map[string]tableSize{}
	for _, n := range names {
		q := pgx.Identifier{schema, n}.Sanitize()
		if _, err := db.Exec(ctx, "VACUUM ANALYZE "+q); err != nil {
			return nil, err
		}
		var s tableSize
		if err := db.QueryRow(ctx, "SELECT count(*), pg_total_relation_size('"+q+"') FROM "+q).Scan(&s.rows, &s.bytes); err != nil {
			return nil, err
		}
		out[n] = s
	}
	return out, nil
}

func per(n int64, turns int) float64 { return float64(n) / float64(turns) }

type stats struct{ commits, rollbacks, inserted, updated, deleted, wal, xid int64 }

// serverStats reads the database's counters and the WAL position, after
// letting the backends flush their statistics.
func serverStats(ctx context.Context, db *pgx.Conn) (stats, error) {
	time.Sleep(1500 * time.Millisecond)
	var s stats
	_, _ = db.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
	err := db.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted,
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits, &s.rollbacks, &s.inserted, &s.updated, &s.deleted, &s.wal)
	if err != nil {
		return s, err
	}
	// Transaction ids are given to transactions that write (and to this
	// call): their difference counts the write transactions, server-wide.
	// Read-only statements count in xact_commit too (each is a transaction
	// of its own), so commits overstate what must reach the disk.
	err = db.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&s.xid)
	return s, err
}

// logStatements turns statement logging (with each line's transaction id)
// on or off for the cluster, without a restart.
func logStatements(ctx context.Context, db *pgx.Conn, on bool) error {
	stmts := []string{`ALTER SYSTEM SET log_statement = 'all'`, `ALTER SYSTEM SET log_line_prefix = 'VX=%v '`}
	if !on {
		stmts = []string{`ALTER SYSTEM RESET log_statement`, `ALTER SYSTEM RESET log_line_prefix`}
	}
	for _, q := range append(stmts, `SELECT pg_reload_conf()`) {
		if _, err := db.Exec(ctx, q); err != nil {
			return err
		}
	}
	time.Sleep(500 * time.Millisecond)
	return nil
}

// printWrites groups the logged write transactions by the shapes of their
// statements (numbers and literals cut) and prints them per turn.
func printWrites(path string, turns int) {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "turncost:", err)
		return
	}
	_ = os.WriteFile(filepath.Join(os.TempDir(), "turncost-statements.log"), data, 0o644)
	re := regexp.MustCompile(`^VX=(\S+) LOG:  (?:statement|execute [^:]*): (.*)$`)
	shape := regexp.MustCompile(`\$\d+|'[^']*'|\b\d+\b|\s+`)
	name := regexp.MustCompile(`^-- name: (\S+)`)
	write := regexp.MustCompile(`(?i)\b(insert|update|delete)\b|pg_notify|nextval`)
	byXid := map[string][]string{}
	writes := map[string]bool{}
	var order []string
	var cur, text string
	flush := func() {
		if cur == "" {
			return
		}
		if write.MatchString(text) {
			writes[cur] = true
		}
		label := text
		if m := name.FindStringSubmatch(text); m != nil {
			label = "river " + m[1]
		} else {
			label = strings.TrimSpace(shape.ReplaceAllString(label, " "))
			if len(label) > 70 {
				label = label[:70]
			}
		}
		if strings.EqualFold(label, "begin") || strings.EqualFold(label, "commit") {
			cur = ""
			return
		}
		if _, ok := byXid[cur]; !ok {
			order = append(order, cur)
		}
		byXid[cur] = append(byXid[cur], label)
		cur = ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			flush()
			cur, text = m[1], m[2]
			continue
		}
		if strings.HasPrefix(line, "VX=") {
			flush()
			continue
		}
		if cur != "" {
			text += " " + line
		}
	}
	flush()
	for x := range byXid {
		if !writes[x] {
			delete(byXid, x) // read only
		}
	}
	groups := map[string]int{}
	for _, x := range order {
		if qs, ok := byXid[x]; ok {
			groups[strings.Join(qs, " ⏎ ")]++
		}
	}
	type g struct {
		k string
		n int
	}
	var gs []g
	for k, n := range groups {
		gs = append(gs, g{k, n})
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].n > gs[j].n })
	fmt.Printf("\nwrite transactions by their statements (%d in all, %.2f per turn):\n", len(byXid), per(int64(len(byXid)), turns))
	for _, x := range gs {
		fmt.Printf("  %6.2f/turn  %s\n", per(int64(x.n), turns), x.k)
	}
}
