package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

func TestTelegramOffsetAndCommandsHash(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	s := repository.NewTelegramStore(pool)
	ctx := t.Context()
	if id, err := s.LastUpdateID(ctx, 7); err != nil || id != 0 {
		t.Fatalf("fresh offset: %d %v", id, err)
	}
	for _, id := range []int64{5, 9, 3} {
		if err := s.SetLastUpdateID(ctx, 7, id); err != nil {
			t.Fatal(err)
		}
	}
	if id, _ := s.LastUpdateID(ctx, 7); id != 9 {
		t.Fatalf("offset moved back: %d", id)
	}
	if err := s.SetCommandsHash(ctx, 7, "abc"); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.CommandsHash(ctx, 7); h != "abc" {
		t.Fatalf("hash %q", h)
	}
	if id, _ := s.LastUpdateID(ctx, 7); id != 9 {
		t.Fatalf("hash write reset the offset: %d", id)
	}
}

func TestTelegramPairingLifecycle(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	s := repository.NewTelegramStore(pool)
	ctx := t.Context()
	req := services.Pairing{UserID: 9, ChatID: 9, DisplayName: "Ann", Code: "ABC234", TimelineScope: "tg:9", ExpiresAt: time.Now().Add(time.Hour)}
	p, err := s.RequestPairing(ctx, req)
	if err != nil || p.Code != "ABC234" || p.ApprovedAt != nil {
		t.Fatalf("request: %+v %v", p, err)
	}
	// Asking again keeps the code.
	req.Code = "ZZZ999"
	if p, _ := s.RequestPairing(ctx, req); p.Code != "ABC234" {
		t.Fatalf("second request changed the code: %+v", p)
	}
	// Another user drawing a taken code conflicts.
	other := services.Pairing{UserID: 10, ChatID: 10, Code: "ABC234", TimelineScope: "tg:10", ExpiresAt: time.Now().Add(time.Hour)}
	if _, err := s.RequestPairing(ctx, other); !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("code collision: %v", err)
	}
	if _, err := s.ApprovePairing(ctx, "NOPE22"); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("unknown code: %v", err)
	}
	p, err = s.ApprovePairing(ctx, " abc234 ")
	if err != nil || p.ApprovedAt == nil || p.TimelineScope != "tg:9" {
		t.Fatalf("approve: %+v %v", p, err)
	}
	if _, err := s.ApprovePairing(ctx, "ABC234"); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("approved twice: %v", err)
	}
	if p, _ := s.PairingByUser(ctx, 9); p.ApprovedAt == nil {
		t.Fatalf("by user: %+v", p)
	}
	// An expired code cannot be approved, and asking again gives a new one.
	exp := services.Pairing{UserID: 11, ChatID: 11, Code: "OLD222", TimelineScope: "tg:11", ExpiresAt: time.Now().Add(-time.Minute)}
	if _, err := s.RequestPairing(ctx, exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApprovePairing(ctx, "OLD222"); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("expired approved: %v", err)
	}
	exp.Code, exp.ExpiresAt = "NEW333", time.Now().Add(time.Hour)
	if p, _ := s.RequestPairing(ctx, exp); p.Code != "NEW333" {
		t.Fatalf("expired code not renewed: %+v", p)
	}
	list, err := s.ListPairings(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestTelegramSentChunks(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	s := repository.NewTelegramStore(pool)
	ctx := t.Context()
	for _, i := range []int{0, 2, 2} {
		if err := s.MarkChunkSent(ctx, "reply:1", i, int64(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	sent, err := s.SentChunks(ctx, "reply:1")
	if err != nil || len(sent) != 2 || !sent[0] || !sent[2] {
		t.Fatalf("sent: %v %v", sent, err)
	}
	// The last chunk that reached the chat (a chunk given up on is
	// recorded with id 0 and is not one).
	if err := s.MarkChunkSent(ctx, "reply:1", 3, 0); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{"reply:1": 102, "reply:2": 0} {
		if id, err := s.LastSentMessage(ctx, key); err != nil || id != want {
			t.Fatalf("last sent message of %s: %d %v, want %d", key, id, err, want)
		}
	}
}

// TestLeaseTakeover: one holder at a time; when the holder's connection is
// killed its lease is lost and another session takes it.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	pool, schema := dbtest.Schema(t)
	other := dbtest.PoolFor(t, dbtest.SchemaURL(dbtest.URL(t), schema))
	a, b := repository.NewTelegramStore(pool), repository.NewTelegramStore(other)
	ctx := t.Context()
	la, err := a.TryLease(ctx, "poll", 100*time.Millisecond)
	if err != nil || la == nil {
		t.Fatalf("first lease: %v %v", la, err)
	}
	if lb, err := b.TryLease(ctx, "poll", 100*time.Millisecond); err != nil || lb != nil {
		t.Fatalf("second holder: %v %v", lb, err)
	}
	// Another schema's lease of the same name is independent.
	third, _ := dbtest.Schema(t)
	if l, err := repository.NewTelegramStore(third).TryLease(ctx, "poll", time.Second); err != nil || l == nil {
		t.Fatalf("other schema: %v %v", l, err)
	} else {
		l.Release()
	}
	// Wait (up to 5 s) for the backend to be gone: its locks are released
	// as it exits, which can come after its socket is closed.
	if _, err := other.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, la.BackendPID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("lease not reported lost after its connection died")
	}
	la.Release()
	lb, err := b.TryLease(ctx, "poll", 100*time.Millisecond)
	if err != nil || lb == nil {
		t.Fatalf("takeover: %v %v", lb, err)
	}
	lb.Release()
	lb.Release()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if la, err := a.TryLease(cctx, "poll", time.Second); err != nil || la == nil {
		t.Fatalf("after release: %v %v", la, err)
	} else {
		la.Release()
	}
}
