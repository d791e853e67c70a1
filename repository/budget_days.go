package repository

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

const budgetCols = `to_char(day, 'YYYY-MM-DD'), kind, spent, reserved, calls, refused`

func scanBudgetDay(row pgx.Row) (services.BudgetDay, error) {
	var d services.BudgetDay
	var kind string
	err := row.Scan(&d.Day, &kind, &d.Spent, &d.Reserved, &d.Calls, &d.Refused)
	d.Kind = services.BudgetKind(kind)
	return d, err
}

// ReserveBudget adds tokens to the reservation of (day, kind) in one
// statement that succeeds only while spent + reserved + tokens <= limit:
// the row lock of the upsert orders concurrent reservations, on any
// instance, so together they never pass the limit. A refused reservation
// counts on the row and returns it with ok false.
func (s *Store) ReserveBudget(ctx context.Context, day string, kind services.BudgetKind, tokens, limit int64) (services.BudgetDay, bool, error) {
	if tokens < 0 {
		return services.BudgetDay{}, false, services.Errorf(services.EINVALID, "a reservation of %d tokens", tokens)
	}
	d, err := scanBudgetDay(s.db.QueryRow(ctx, `
		INSERT INTO budget_days AS b (day, kind, reserved)
		SELECT $1::date, $2, $3::bigint WHERE $3::bigint <= $4::bigint
		ON CONFLICT (day, kind) DO UPDATE SET reserved = b.reserved + EXCLUDED.reserved
		WHERE b.spent + b.reserved + EXCLUDED.reserved <= $4::bigint
		RETURNING `+budgetCols, day, string(kind), tokens, limit))
	if err == nil {
		return d, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return d, false, wrapErr("reserve budget", err)
	}
	d, err = scanBudgetDay(s.db.QueryRow(ctx, `
		INSERT INTO budget_days AS b (day, kind, refused) VALUES ($1::date, $2, 1)
		ON CONFLICT (day, kind) DO UPDATE SET refused = b.refused + 1
		RETURNING `+budgetCols, day, string(kind)))
	return d, false, wrapErr("count refused budget", err)
}

// SettleBudget replaces a reservation of (day, kind) by the tokens the
// call used, and counts the call.
func (s *Store) SettleBudget(ctx context.Context, day string, kind services.BudgetKind, reserved, used int64) (services.BudgetDay, error) {
	d, err := scanBudgetDay(s.db.QueryRow(ctx, `
		INSERT INTO budget_days AS b (day, kind, spent, calls) VALUES ($1::date, $2, $4::bigint, 1)
		ON CONFLICT (day, kind) DO UPDATE SET reserved = greatest(b.reserved - $3::bigint, 0), spent = b.spent + $4::bigint, calls = b.calls + 1
		RETURNING `+budgetCols, day, string(kind), reserved, max(used, 0)))
	return d, wrapErr("settle budget", err)
}

// BudgetDays lists the rows of the days from..to (inclusive), by day and kind.
func (s *Store) BudgetDays(ctx context.Context, from, to string) ([]services.BudgetDay, error) {
	rows, err := s.db.Query(ctx, `SELECT `+budgetCols+` FROM budget_days WHERE day BETWEEN $1::date AND $2::date ORDER BY day, kind`, from, to)
	if err != nil {
		return nil, wrapErr("list budget days", err)
	}
	defer rows.Close()
	var out []services.BudgetDay
	for rows.Next() {
		d, err := scanBudgetDay(rows)
		if err != nil {
			return nil, wrapErr("list budget days", err)
		}
		out = append(out, d)
	}
	return out, wrapErr("list budget days", rows.Err())
}
