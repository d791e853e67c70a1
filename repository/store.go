// Package repository implements the services' stores on PostgreSQL with pgx.
// One file per table, raw SQL beside the method that runs it, every column
// scanned explicitly. pgx.ErrNoRows becomes services.ENOTFOUND here, at the
// driver boundary.
package repository

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/services"
)

// DBTX is what both a pool and a transaction offer.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store is the PostgreSQL implementation of services.Store.
type Store struct {
	db DBTX
	// in is the transaction this store is bound to (nil on a pool): a
	// savepoint's events go with it.
	in *Tx
	// claims sends a claimed run's status (AnnounceClaims).
	claims *Notifier
}

var _ services.Store = (*Store)(nil)

// New returns a Store on a pool.
func New(pool *pgxpool.Pool) *Store { return &Store{db: pool} }

// Tx is the services.Tx of the PostgreSQL store: the stores bound to one
// pgx transaction.
type Tx struct {
	*Store
	tx pgx.Tx
	// committed: Transact commits tx, and sends the events published with
	// it (Notifier.PublishTx) by its last statement before COMMIT; on a
	// Tx of the caller's own (NewTx) they are sent at once, in tx.
	committed bool
	events    []string
	notifier  *Notifier
	// top: a transaction of its own (not a savepoint), which Transact
	// commits; taken: the sender's events a statement of it sent (carry),
	// given back to the sender when it does not commit.
	top   bool
	taken []string
}

var _ services.Tx = (*Tx)(nil)

// NewTx returns the stores bound to the caller's transaction.
func NewTx(tx pgx.Tx) *Tx {
	t := &Tx{tx: tx}
	t.Store = &Store{db: tx, in: t}
	return t
}

// DriverTx implements services.Tx: the pgx.Tx, for the job queue's inserts.
func (t *Tx) DriverTx() any { return t.tx }

// MaxConnIdle is how long an idle pooled connection stays open (unless the
// URL sets pool_max_conn_idle_time): an instance that went quiet gives its
// connections back to a shared PostgreSQL within about a minute.
const MaxConnIdle = 30 * time.Second

// Open connects a pool and checks the connection. The pool opens no
// connection before it needs one (pool_min_conns 0) and closes those idle
// for MaxConnIdle.
func Open(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse DATABASE_URL: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conn_idle_time") {
		cfg.MaxConnIdleTime = MaxConnIdle
	}
	if !strings.Contains(dsn, "pool_health_check_period") {
		cfg.HealthCheckPeriod = MaxConnIdle / 2
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: ping: %w", err)
	}
	return pool, nil
}

// Transact runs fn in a transaction (a savepoint when already in one). It
// commits when fn returns nil and rolls back on error or panic.
func (s *Store) Transact(ctx context.Context, fn func(tx services.Tx) error) error {
	return s.transact(ctx, func(tx *Tx) error { return fn(tx) })
}

// transact is Transact giving fn the concrete Tx, for the stores' own
// multi-statement methods.
func (s *Store) transact(ctx context.Context, fn func(tx *Tx) error) (err error) {
	var t *Tx
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr("begin transaction", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(ctx)
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback(ctx)
			if t != nil && t.notifier != nil {
				t.notifier.requeue(t.taken)
			}
		}
	}()
	t = NewTx(tx)
	t.committed = true
	t.top = s.in == nil
	t.Store.claims = s.claims
	if err = fn(t); err != nil {
		return err
	}
	if s.in == nil {
		if err = t.sendEvents(ctx); err != nil {
			return err
		}
	}
	t.taken = nil // sent or not, COMMIT decides: not sent again
	if err = tx.Commit(ctx); err != nil {
		return wrapErr("commit", err)
	}
	if s.in != nil && len(t.events) > 0 {
		// A savepoint released: its events commit with the transaction.
		return s.in.addEvents(ctx, t.notifier, t.events...)
	}
	return nil
}

// wrapErr prefixes err with the layer and operation, translating the errors
// that have a domain meaning.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *services.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &services.Error{Kind: services.ENOTFOUND, Message: op + ": not found", Err: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return &services.Error{Kind: services.ECONFLICT, Message: op + ": already exists", Err: err}
		case "23503", "23514", "22P02", "22001": // fk, check, bad text repr, too long
			return &services.Error{Kind: services.EINVALID, Message: op + ": " + pgErr.Message, Err: err}
		}
	}
	if isUnavailable(err) {
		return &services.Error{Kind: services.EUNAVAILABLE, Message: "database unavailable, retry shortly", Err: err}
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// IsTooManyConnections reports whether PostgreSQL refused a connection for
// having too many (SQLSTATE 53300 too_many_connections; an instance waits
// and tries again).
func IsTooManyConnections(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300"
}

// isUnavailable reports connection-level failures (server restarting,
// refused, out of connection slots).
func isUnavailable(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || IsTooManyConnections(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, 08xxx connection exceptions
		return pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" || pgErr.Code[:2] == "08"
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	// The server went away mid-statement (a crash, a failover): the
	// connection read EOF or was reset. Whether the statement committed is
	// unknown, so the caller retries with its idempotency key.
	var netErr net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.As(err, &netErr)
}

// WithParam adds a connection parameter to a database URL (postgres://…)
// or key=value string that does not set it already.
func WithParam(dsn, key, value string) string {
	if strings.Contains(dsn, key+"=") {
		return dsn
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + key + "=" + value
	}
	return strings.TrimSpace(dsn) + " " + key + "=" + value
}
