// Package localpg finds a PostgreSQL to talk to when none is configured: a
// server answering on the default local address, or a private cluster it
// initialises and starts from the installed server binaries. PostgreSQL
// refuses to run as root, so when the caller is root the cluster's files and
// processes belong to an unprivileged user ("postgres" if it exists, else
// "nobody").
package localpg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultServerURL is the local server tried before starting a cluster.
const DefaultServerURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Reachable reports whether a server answers at dsn within the timeout.
func Reachable(ctx context.Context, dsn string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

// EnsureDatabase connects to serverURL and creates database name if missing.
// It returns serverURL with its database replaced by name.
func EnsureDatabase(ctx context.Context, serverURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("localpg: connect %s: %w", Redact(serverURL), err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("localpg: look up database %q: %w", name, err)
	}
	if !exists {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		// 42P04 duplicate_database, 23505 a concurrent creator won the race.
		if err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505")) {
			return "", fmt.Errorf("localpg: create database %q: %w", name, err)
		}
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("localpg: parse server url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Redact hides the password of a connection URL for logs.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// FindBinDir returns the directory holding initdb and pg_ctl: $PG_BIN_DIR,
// else the newest /usr/lib/postgresql/*/bin, else the directory of initdb on PATH.
func FindBinDir() (string, error) {
	if d := os.Getenv("PG_BIN_DIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("localpg: no PostgreSQL server binaries found (install the postgresql package, or set DATABASE_URL)")
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Cluster is a private PostgreSQL cluster under DataDir.
type Cluster struct {
	DataDir string
	Port    int
	binDir  string
	cred    *syscall.Credential
	started bool // this process started it (so Stop stops it)
}

// URL is the cluster's connection URL for database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Start initialises dataDir when empty and starts the cluster on port (0
// picks a free one), reusing a cluster already running there. Each setting
// ("max_connections=30") is a server setting of this start. The caller
// stops it with Stop.
func Start(ctx context.Context, dataDir string, port int, settings ...string) (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{DataDir: dataDir, Port: port, binDir: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	if err := c.ensureDir(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		if err := c.run(ctx, "initdb", "-D", dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"); err != nil {
			return nil, fmt.Errorf("localpg: initdb in %s: %w", dataDir, err)
		}
	}
	if c.Port == 0 {
		if c.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if Reachable(ctx, c.URL("postgres"), time.Second) {
		return c, nil // left running by an earlier process
	}
	// Durability settings stay PostgreSQL's defaults (fsync, synchronous
	// commit, full-page writes): this cluster holds a user's whole history,
	// and a power cut must not lose or corrupt it.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.Port, dataDir)
	for _, kv := range settings {
		opts += " -c " + kv
	}
	if err := c.run(ctx, "pg_ctl", "-D", dataDir, "-o", opts, "-l", filepath.Join(dataDir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		logTail, _ := os.ReadFile(filepath.Join(dataDir, "server.log"))
		return nil, fmt.Errorf("localpg: start cluster in %s: %w\n%s", dataDir, err, tail(string(logTail), 1500))
	}
	c.started = true
	return c, nil
}

// Stop stops the cluster if this process started it.
func (c *Cluster) Stop() error {
	if c == nil || !c.started {
		return nil
	}
	c.started = false
	return c.run(context.Background(), "pg_ctl", "-D", c.DataDir, "-m", "fast", "-w", "stop")
}

func (c *Cluster) ensureDir() error {
	parent := filepath.Dir(c.DataDir)
	if c.cred != nil {
		// The unprivileged user must traverse the parents we create (the
		// service's own DATA_DIR): search permission only, no listing.
		if err := os.MkdirAll(parent, 0o711); err != nil {
			return fmt.Errorf("localpg: create %s: %w", parent, err)
		}
		if st, err := os.Stat(parent); err == nil && st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(parent, st.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("localpg: make %s searchable: %w", parent, err)
			}
		}
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("localpg: create %s: %w", c.DataDir, err)
	}
	if c.cred != nil {
		if err := os.Chown(c.DataDir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("localpg: chown %s: %w", c.DataDir, err)
		}
		// The unprivileged user must be able to reach the data directory.
		for d := filepath.Dir(c.DataDir); d != "/" && d != "."; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
				return fmt.Errorf("localpg: %s is not searchable by the unprivileged postgres user; choose a data directory outside it (DATA_DIR)", d)
			}
		}
	}
	return nil
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.DataDir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, tail(string(out), 1500))
	}
	return nil
}

func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("localpg: running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Standby makes a streaming standby of c in dataDir (pg_basebackup -R: a
// base backup plus the primary_conninfo and standby.signal that make it
// follow c) and starts it on port (0 picks a free one). For a primary and
// standby pair on one machine, as the failover tests build.
func (c *Cluster) Standby(ctx context.Context, dataDir string, port int) (*Cluster, error) {
	s := &Cluster{DataDir: dataDir, Port: port, binDir: c.binDir, cred: c.cred}
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	if err := s.run(ctx, "pg_basebackup", "-D", dataDir, "-R", "-X", "stream", "-c", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres"); err != nil {
		return nil, fmt.Errorf("localpg: base backup of %s into %s: %w", c.DataDir, dataDir, err)
	}
	return Start(ctx, dataDir, port)
}

// Promote ends a standby's recovery and makes it a primary (pg_ctl promote,
// waiting until it accepts writes).
func (c *Cluster) Promote(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "-D", c.DataDir, "-w", "-t", "60", "promote")
}

// Crash stops the cluster the way a crash does (pg_ctl stop -m immediate:
// every server process quits at once, no shutdown checkpoint; the next
// start recovers from WAL).
func (c *Cluster) Crash() error {
	if c == nil || !c.started {
		return nil
	}
	c.started = false
	return c.run(context.Background(), "pg_ctl", "-D", c.DataDir, "-m", "immediate", "-w", "stop")
}
