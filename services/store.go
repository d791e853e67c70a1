package services

import "context"

// Store is every store plus transactions. Transact runs fn with a Store bound
// to one database transaction, committed when fn returns nil and rolled back
// when it returns an error or panics.
type Store interface {
	ChatStore
	RunStore
	ScheduleStore
	AttachmentStore
	ApprovalStore
	Transact(ctx context.Context, fn func(tx Store) error) error
}
