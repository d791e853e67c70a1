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
	tok := func(n int64) services.BudgetAmount { return services.BudgetAmount{Tokens: n} }
	lim := services.BudgetAmount{Tokens: limit, Cost: 1 << 60}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		st := stores[g%2]
		wg.Go(func() {
			for i := 0; i < 15; i++ {
				d, got, err := st.ReserveBudget(ctx, "2026-03-04", services.BudgetSchedule, tok(each), lim)
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
		if _, err := stores[i%2].SettleBudget(ctx, "2026-03-04", services.BudgetSchedule, tok(each), tok(40)); err != nil {
			t.Fatal(err)
		}
	}
	d, got, err := stores[1].ReserveBudget(ctx, "2026-03-04", services.BudgetSchedule, tok(600), lim)
	if err != nil || !got || d.Spent != 400 || d.Reserved != limit-1000+600 || d.Calls != 10 {
		t.Fatalf("after settling: %+v ok=%v err=%v", d, got, err)
	}
	// Another kind and another day have budgets of their own; a call
	// larger than the whole budget is refused outright.
	if _, got, _ := stores[0].ReserveBudget(ctx, "2026-03-04", services.BudgetMain, tok(5000), lim); !got {
		t.Fatal("the main budget was refused by the schedules' spend")
	}
	if _, got, _ := stores[0].ReserveBudget(ctx, "2026-03-05", services.BudgetSchedule, tok(limit+1), lim); got {
		t.Fatal("a reservation over the whole budget was made")
	}
}

// TestMoneyBudgetReservations: the money limit is checked in the same
// statement as the tokens: goroutines on two pools reserving micro-dollars
// never pass it together, and settling replaces a reservation by the
// money the call used.
func TestMoneyBudgetReservations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := dbtest.Schema(t)
	stores := []*repository.Store{repository.New(pool), repository.New(dbtest.PoolFor(t, dbtest.SchemaURL(dbtest.URL(t), schema)))}
	limit := services.BudgetAmount{Tokens: 1 << 60, Cost: services.MoneyFromUSD(1)} // $1
	ask := services.BudgetAmount{Tokens: 10, Cost: services.MoneyFromUSD(0.03)}
	var ok atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		st := stores[g%2]
		wg.Go(func() {
			for i := 0; i < 10; i++ {
				d, got, err := st.ReserveBudget(ctx, "2026-03-04", services.BudgetMain, ask, limit)
				if err != nil {
					t.Error(err)
					return
				}
				if d.SpentCost+d.ReservedCost > limit.Cost {
					t.Errorf("after a reservation: %s spent + %s reserved > %s", d.SpentCost, d.ReservedCost, limit.Cost)
				}
				if got {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 33 { // 33 × $0.03 = $0.99
		t.Fatalf("%d reservations of $0.03 made within $1, want 33", ok.Load())
	}
	d, err := stores[0].SettleBudget(ctx, "2026-03-04", services.BudgetMain, ask, services.BudgetAmount{Tokens: 4, Cost: services.MoneyFromUSD(0.01)})
	if err != nil || d.SpentCost != services.MoneyFromUSD(0.01) || d.ReservedCost != services.MoneyFromUSD(0.96) || d.Spent != 4 {
		t.Fatalf("after settling: %+v %v", d, err)
	}
	if _, got, _ := stores[1].ReserveBudget(ctx, "2026-03-04", services.BudgetMain, ask, limit); !got {
		t.Fatal("a reservation that fits after settling was refused")
	}
	if _, got, _ := stores[1].ReserveBudget(ctx, "2026-03-04", services.BudgetMain, ask, limit); got {
		t.Fatal("a reservation past $1 was made")
	}
}
