package services

import (
	"context"
	"time"
)

// Pairing is a Telegram user who is not the owner, waiting for the owner's
// approval (ApprovedAt nil, Code valid until ExpiresAt) or approved to talk
// in their own timeline (TimelineScope, "tg:<user id>").
type Pairing struct {
	UserID        int64
	ChatID        int64
	DisplayName   string
	Code          string
	TimelineScope string
	CreatedAt     time.Time
	ExpiresAt     time.Time
	ApprovedAt    *time.Time
}

// Approved reports whether the owner approved the pairing.
func (p Pairing) Approved() bool { return p.ApprovedAt != nil }

// Pairings is what the owner does with pairings (the pairing page,
// `switchboard pair`); the Telegram channel keeps them through its own
// store.
type Pairings interface {
	// ListPairings returns approved pairings and unexpired pending ones,
	// oldest first.
	ListPairings(ctx context.Context) ([]Pairing, error)
	// ApprovePairing approves the pending, unexpired pairing with code
	// (case-insensitive); ENOTFOUND when there is none (unknown, expired or
	// already approved).
	ApprovePairing(ctx context.Context, code string) (Pairing, error)
	// DenyPairing refuses the pending, unexpired pairing with code: its
	// code stops working (the stranger may ask again later, with a new
	// code); ENOTFOUND as for ApprovePairing.
	DenyPairing(ctx context.Context, code string) (Pairing, error)
}
