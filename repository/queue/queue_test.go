package queue_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/repository/queue"
	"github.com/switchboard/switchboard/services"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// An outbound delivery is unique by its channel and key, whatever its
// payload: a second notice with the same key (a pairing reply for the same
// code, triggered by another message) schedules nothing.
func TestOutboundIsUniqueByKey(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	enq, err := queue.NewEnqueuer(context.Background(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, payload := range []string{`{"reply_to_message_id":10}`, `{"reply_to_message_id":11}`, `{"reply_to_message_id":12}`} {
		if err := enq.EnqueueOutbound(t.Context(), services.Outbound{Channel: services.SourceTelegram, Key: "pairing:9:ABC234", Payload: json.RawMessage(payload)}); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
	if err := enq.EnqueueOutbound(t.Context(), services.Outbound{Channel: services.SourceTelegram, Key: "reply:5", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'outbound' AND args->>'key' = 'pairing:9:ABC234'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var all int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'outbound'`).Scan(&all); err != nil {
		t.Fatal(err)
	}
	if n != 1 || all != 2 {
		t.Fatalf("outbound jobs: %d with the repeated key, %d in all; want 1 and 2", n, all)
	}
}
