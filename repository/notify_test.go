package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// Events one instance publishes, alone or many at once, reach another
// instance on the same schema, all of them and in order.
func TestNotifierDeliversEveryEventInOrder(t *testing.T) {
	pool, _ := dbtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub, err := repository.NewNotifier(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := repository.NewNotifier(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan services.Event, 200)
	listening := make(chan struct{})
	go sub.Listen(ctx, func(e services.Event) { got <- e }, func() {})
	// Listen has no ready signal: publish a probe until it arrives.
	go func() {
		defer close(listening)
		for {
			select {
			case e := <-got:
				if e.Type == "probe" {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	for probe := true; probe; {
		_ = pub.Publish(ctx, services.Event{Type: "probe", TimelineScope: "t"})
		select {
		case <-listening:
			probe = false
		case <-time.After(100 * time.Millisecond):
		}
	}
	for len(got) > 0 { // late probes
		<-got
	}
	const n = 150 // published in one burst: most go in batches
	for i := range n {
		if err := pub.Publish(ctx, services.Event{Type: "message", TimelineScope: "t", ID: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	want := int64(1)
	for want <= n {
		select {
		case e := <-got:
			if e.Type == "probe" {
				continue
			}
			if e.ID != want {
				t.Fatalf("event %d arrived when %d was due", e.ID, want)
			}
			want++
		case <-ctx.Done():
			t.Fatalf("%d of %d events arrived", want-1, n)
		}
	}
}
