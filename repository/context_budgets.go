package repository

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

// ContextBudget reads a timeline's budget profile (services.ContextBudgets):
// the default at version 0 when none is stored; the default at the stored
// version with a CONTEXT_BUDGET_FALLBACK error when the stored one is not
// valid.
func (s *Store) ContextBudget(ctx context.Context, timelineScope string) (services.ContextBudget, error) {
	var version int
	var raw []byte
	err := s.db.QueryRow(ctx, `SELECT version, profile FROM context_budgets WHERE timeline_scope = $1`, timelineScope).Scan(&version, &raw)
	if err == pgx.ErrNoRows {
		return services.DefaultContextBudget(), nil
	}
	if err != nil {
		return services.ContextBudget{}, wrapErr("read the budget profile", err)
	}
	return budgetProfile(version, raw)
}

// budgetProfile is a stored profile at its version as ContextBudget
// returns it.
func budgetProfile(version int, raw []byte) (services.ContextBudget, error) {
	b, perr := services.ParseContextBudget(raw)
	if perr != nil {
		def := services.DefaultContextBudget()
		def.Version = version
		return def, services.CodedErrorf(services.EINVALID, services.CodeBudgetFallback,
			"the stored budget profile (version %d) is not valid, the default is used: %s", version, services.ErrorMessage(perr))
	}
	b.Version = version
	return b, nil
}

// PutContextBudget stores a profile at its version (services.ContextBudgets).
func (s *Store) PutContextBudget(ctx context.Context, timelineScope string, b services.ContextBudget) (services.ContextBudget, error) {
	if err := b.Validate(); err != nil {
		return services.ContextBudget{}, err
	}
	profile, err := json.Marshal(services.ContextBudget{Layers: b.Layers})
	if err != nil {
		return services.ContextBudget{}, wrapErr("encode the budget profile", err)
	}
	var tag int64
	if b.Version == 0 {
		ct, err := s.db.Exec(ctx, `INSERT INTO context_budgets (timeline_scope, version, profile) VALUES ($1, 1, $2)
			ON CONFLICT (timeline_scope) DO NOTHING`, timelineScope, profile)
		if err != nil {
			return services.ContextBudget{}, wrapErr("store the budget profile", err)
		}
		tag = ct.RowsAffected()
	} else {
		ct, err := s.db.Exec(ctx, `UPDATE context_budgets SET profile = $3, version = version + 1, updated_at = now()
			WHERE timeline_scope = $1 AND version = $2`, timelineScope, b.Version, profile)
		if err != nil {
			return services.ContextBudget{}, wrapErr("store the budget profile", err)
		}
		tag = ct.RowsAffected()
	}
	if tag == 0 {
		var cur int
		err := s.db.QueryRow(ctx, `SELECT version FROM context_budgets WHERE timeline_scope = $1`, timelineScope).Scan(&cur)
		if err != nil && err != pgx.ErrNoRows {
			return services.ContextBudget{}, wrapErr("read the budget profile's version", err)
		}
		return services.ContextBudget{}, services.CodedErrorf(services.ECONFLICT, services.CodeBudgetConflict,
			"the budget profile is at version %d, not %d: reload it and apply your change again", cur, b.Version)
	}
	out := services.ContextBudget{Version: b.Version + 1, Layers: b.Layers}
	return out, nil
}
