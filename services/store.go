package services

import "context"

// Store is every store plus transactions. Transact runs fn with a Tx, the
// stores bound to one database transaction, committed when fn returns nil
// and rolled back when it returns an error or panics. The stores whose
// rows commit with a run's steps are part of it, so a Tx can write them:
// the daily budgets (a run's first reservation commits with its prompt
// step, its answer's settlement with its answer) and the kept requests (a
// model call's step and its request in one statement).
type Store interface {
	ChatStore
	RunStore
	RunRequests
	BudgetStore
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
