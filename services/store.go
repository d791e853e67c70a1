package services

import "context"

// Store is every store plus transactions. Transact runs fn with a Tx, the
// stores bound to one database transaction, committed when fn returns nil
// and rolled back when it returns an error or panics.
type Store interface {
	ChatStore
	RunStore
	ScheduleStore
	AttachmentStore
	ApprovalStore
	VoiceReplies
	Transact(ctx context.Context, fn func(tx Tx) error) error
}

// Tx is the Store bound to one open transaction: what Transact gives its
// function, and the parameter of every call that must commit with the
// caller's rows (River's shape: EnqueueRunTx(ctx, tx, run)). Its stores
// read and write in the transaction; its Transact opens a savepoint.
type Tx interface {
	Store
	// DriverTx is the database driver's own transaction (a pgx.Tx for the
	// PostgreSQL store), for the packages beside the stores that write in
	// it too: the job queue inserts its jobs there, so a job commits with
	// the rows that asked for it.
	DriverTx() any
}
