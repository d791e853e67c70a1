package repository

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

const budgetCols = `to_char(day, 'YYYY-MM-DD'), kind, spent, reserved, spent_micros, reserved_micros, calls, refused`

func scanBudgetDay(row pgx.Row) (services.BudgetDay, error) {
	var d services.BudgetDay
	var kind string
	var spentCost, reservedCost int64
	err := row.Scan(&d.Day, &kind, &d.Spent, &d.Reserved, &spentCost, &reservedCost, &d.Calls, &d.Refused)
	d.SpentCost, d.ReservedCost = services.Money(spentCost), services.Money(reservedCost)
	d.Kind = services.BudgetKind(kind)
	return d, err
}

// ReserveBudget adds ask to the reservation of (day, kind) in one
// statement that succeeds only while spent + reserved + ask stays within
// limit in tokens and in money: the row lock of the upsert orders
// concurrent reservations, on any instance, so together they never pass
// either limit. A refused reservation counts on the row and returns it
// with ok false.
func (s *Store) ReserveBudget(ctx context.Context, day string, kind services.BudgetKind, ask, limit services.BudgetAmount) (services.BudgetDay, bool, error) {
	if ask.Tokens < 0 || ask.Cost < 0 {
		return services.BudgetDay{}, false, services.Errorf(services.EINVALID, "a reservation of %d tokens and %s", ask.Tokens, ask.Cost)
	}
	d, err := scanBudgetDay(s.db.QueryRow(ctx, `
		INSERT INTO budget_days AS b (day, kind, reserved, reserved_micros)
		SELECT $1::date, $2, $3::bigint, $4::bigint WHERE $3::bigint <= $5::bigint AND $4::bigint <= $6::bigint
		ON CONFLICT (day, kind) DO UPDATE SET reserved = b.reserved + EXCLUDED.reserved,
			reserved_micros = b.reserved_micros + EXCLUDED.reserved_micros
		WHERE b.spent + b.reserved + EXCLUDED.reserved <= $5::bigint
		  AND b.spent_micros + b.reserved_micros + EXCLUDED.reserved_micros <= $6::bigint
		RETURNING `+budgetCols, day, string(kind), ask.Tokens, int64(ask.Cost), limit.Tokens, int64(limit.Cost)))
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

// SettleBudget replaces a reservation of (day, kind) by the tokens and
// money the call used, and counts the call.
//
// In a transaction that has published events, the statement also sends
// them (with those waiting for the sender, first): the settlement is the
// answer's last statement, so its COMMIT needs no NOTIFY of its own.
func (s *Store) SettleBudget(ctx context.Context, day string, kind services.BudgetKind, reserved, used services.BudgetAmount) (services.BudgetDay, error) {
	const settle = `
		INSERT INTO budget_days AS b (day, kind, spent, spent_micros, calls) VALUES ($1::date, $2, $4::bigint, $6::bigint, 1)
		ON CONFLICT (day, kind) DO UPDATE SET reserved = greatest(b.reserved - $3::bigint, 0), spent = b.spent + $4::bigint,
			reserved_micros = greatest(b.reserved_micros - $5::bigint, 0), spent_micros = b.spent_micros + $6::bigint, calls = b.calls + 1
		RETURNING ` + budgetCols
	query, args := settle, []any{day, string(kind), reserved.Tokens, max(used.Tokens, 0), int64(reserved.Cost), int64(max(used.Cost, 0))}
	var n *Notifier
	if s.in != nil && len(s.in.events) > 0 {
		n = s.in.notifier
		if events, ok := s.in.carry(ctx, n); ok {
			query = `WITH b AS (` + settle + `), n AS (
				SELECT pg_notify($7, p) FROM (SELECT p FROM unnest($8::text[]) WITH ORDINALITY AS e(p, i) ORDER BY i) e)
			SELECT b.* FROM b WHERE (SELECT count(*) FROM n) >= 0`
			args = append(args, n.channel, events)
		} else {
			n = nil
		}
	}
	d, err := scanBudgetDay(s.db.QueryRow(ctx, query, args...))
	if err == nil && n != nil {
		n.sends.Add(1)
	}
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
