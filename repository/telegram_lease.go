package repository

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// leaseLockKey is the first key of the session advisory locks taken by
// TryLease (the run queue uses 7302).
const leaseLockKey = 7303

// Lease is a session advisory lock held on a dedicated connection: whoever
// holds it is the one instance doing some singleton work (Telegram long
// polling). PostgreSQL releases the lock when that connection ends, so a
// dead holder's lease passes to the next instance that asks.
type Lease struct {
	conn *pgxpool.Conn
	name string
	lost chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// TryLease takes the lease called name, unless another session holds it: then
// it returns nil and no error. The name is qualified by the current schema,
// so tests in separate schemas do not contend. The lease's connection is
// pinged every checkEvery; when a ping fails the lease is lost (Lost is
// closed), since the lock went with the connection.
func (s *TelegramStore) TryLease(ctx context.Context, name string, checkEvery time.Duration) (*Lease, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, wrapErr("acquire lease connection", err)
	}
	var got bool
	err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema() || ':' || $2))`, leaseLockKey, name).Scan(&got)
	if err != nil {
		conn.Release()
		return nil, wrapErr("try lease "+name, err)
	}
	if !got {
		conn.Release()
		return nil, nil
	}
	if checkEvery <= 0 {
		checkEvery = 2 * time.Second
	}
	l := &Lease{conn: conn, name: name, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.watch(checkEvery)
	return l, nil
}

// Lost is closed when the lease's connection failed: the lock is gone.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

func (l *Lease) watch(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		_, err := l.conn.Exec(ctx, `SELECT 1`)
		cancel()
		if err != nil {
			close(l.lost)
			return
		}
	}
}

// Release gives the lease up (unlocking, or dropping the connection when the
// unlock fails). Safe to call more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		select {
		case <-l.lost:
			_ = l.conn.Conn().Close(context.Background())
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema() || ':' || $2))`, leaseLockKey, l.name)
			if err != nil {
				_ = l.conn.Conn().Close(ctx)
			}
			cancel()
		}
		l.conn.Release()
	})
}

// BackendPID is the server process id of the lease's connection (tests end
// it with pg_terminate_backend to simulate a dead leader).
func (l *Lease) BackendPID() uint32 { return l.conn.Conn().PgConn().PID() }
