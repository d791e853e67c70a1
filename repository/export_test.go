package repository

import "time"

// SetLinger sets how long n's sender waits for more events (NotifyLinger).
func SetLinger(n *Notifier, d time.Duration) { n.linger = d }

// Sends is how many statements n has sent its events in.
func Sends(n *Notifier) int64 { return n.sends.Load() }

// Unsent is how many events tx still holds for its COMMIT.
func Unsent(tx any) int { return len(tx.(*Tx).events) }
