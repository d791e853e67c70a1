package repository_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
)

// TestBudgetReservationsNeverOverspend: many goroutines on two stores
// (two pools: two instances) reserve against one day's budget at once;
// exactly as many reservations succeed as fit, and what is reserved never
// passes the limit. Settling replaces each reservation by its usage.
func TestBudgetReservationsNeverOverspend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := dbtest.Schema(t)
	stores := []*repository.Store{repository.New(pool), repository.New(dbtest.PoolFor(t, dbtest.SchemaURL(dbtest.URL(t), schema)))}
	const limit, each = 10_000, 100
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		st := stores[g%2]
		wg.Go(func() {
			for i := 0; i < 15; i++ {
				d, got, err := st.ReserveBudget(ctx, "2026-03-04", services.BudgetSchedule, each, limit)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Spent+d.Reserved > limit {
					t.Errorf("after a reservation: spent %d + reserved %d > %d", d.Spent, d.Reserved, limit)
				}
				if got {
					ok.Add(1)
				} else {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != limit/each || refused.Load() != 16*15-limit/each {
		t.Fatalf("%d reservations made, %d refused; want %d and %d", ok.Load(), refused.Load(), limit/each, 16*15-limit/each)
	}
	days, err := stores[0].BudgetDays(ctx, "2026-03-01", "2026-03-07")
	if err != nil || len(days) != 1 || days[0].Reserved != limit || days[0].Refused != refused.Load() {
		t.Fatalf("days: %+v, %v", days, err)
	}
	// Calls that used less than reserved make room again.
	for i := 0; i < 10; i++ {
		if _, err := stores[i%2].SettleBudget(ctx, "2026-03-04", services.BudgetSchedule, each, 40); err != nil {
			t.Fatal(err)
		}
	}
	d, got, err := stores[1].ReserveBudget(ctx, "2026-03-04", services.BudgetSchedule, 600, limit)
	if err != nil || !got || d.Spent != 400 || d.Reserved != limit-1000+600 || d.Calls != 10 {
		t.Fatalf("after settling: %+v ok=%v err=%v", d, got, err)
	}
	// Another kind and another day have budgets of their own; a call
	// larger than the whole budget is refused outright.
	if _, got, _ := stores[0].ReserveBudget(ctx, "2026-03-04", services.BudgetMain, 5000, limit); !got {
		t.Fatal("the main budget was refused by the schedules' spend")
	}
	if _, got, _ := stores[0].ReserveBudget(ctx, "2026-03-05", services.BudgetSchedule, limit+1, limit); got {
		t.Fatal("a reservation over the whole budget was made")
	}
}
