package repository

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/services"
)

// codeConflict is the ContextManager's code for a stale versioned update.
const codeConflict = "CONTEXT_BUDGET_CONFLICT"

func scanConstraint(row pgx.Row) (services.Constraint, error) {
	var c services.Constraint
	err := row.Scan(&c.ID, &c.TimelineScope, &c.Text, &c.Hard, &c.Check, &c.Version, &c.UpdatedAt, &c.Proposed)
	return c, err
}

// constraintColumns are a rule's columns; proposed says whether an approved
// proposal of the agent created it.
const constraintColumns = `id, timeline_scope, text, hard, check_pattern, version, updated_at,
	EXISTS (SELECT 1 FROM rule_proposals p WHERE p.constraint_id = context_constraints.id)`

// ListConstraints returns a timeline's rules, oldest first.
func (s *Store) ListConstraints(ctx context.Context, timelineScope string) ([]services.Constraint, error) {
	rows, err := s.db.Query(ctx, `SELECT `+constraintColumns+` FROM context_constraints WHERE timeline_scope = $1 ORDER BY id`, timelineScope)
	if err != nil {
		return nil, wrapErr("list constraints", err)
	}
	defer rows.Close()
	var out []services.Constraint
	for rows.Next() {
		c, err := scanConstraint(rows)
		if err != nil {
			return nil, wrapErr("list constraints", err)
		}
		out = append(out, c)
	}
	return out, wrapErr("list constraints", rows.Err())
}

func validConstraint(c services.Constraint) error {
	if err := validConstraintText(c.Text); err != nil {
		return err
	}
	if c.Check != "" && !c.Hard {
		return services.Errorf(services.EINVALID, "only a hard rule may carry a check pattern")
	}
	return services.ValidRuleCheck(c.Check)
}

func validConstraintText(t string) error {
	if strings.TrimSpace(t) == "" {
		return services.Errorf(services.EINVALID, "rule text is empty")
	}
	if len(t) > 4000 {
		return services.Errorf(services.EINVALID, "rule text is %d bytes; the limit is 4000", len(t))
	}
	return nil
}

// CreateConstraint stores a rule.
func (s *Store) CreateConstraint(ctx context.Context, c services.Constraint) (services.Constraint, error) {
	if err := validConstraint(c); err != nil {
		return services.Constraint{}, err
	}
	// At most services.MaxRuleEntries rules per timeline (seed 001's
	// capacity), checked in the insert itself.
	out, err := scanConstraint(s.db.QueryRow(ctx, `
		INSERT INTO context_constraints (timeline_scope, text, hard, check_pattern)
		SELECT $1, $2, $3, $5 WHERE (SELECT count(*) FROM context_constraints WHERE timeline_scope = $1) < $4
		RETURNING `+constraintColumns, c.TimelineScope, strings.TrimSpace(c.Text), c.Hard, services.MaxRuleEntries, c.Check))
	if err == pgx.ErrNoRows {
		return services.Constraint{}, services.CodedErrorf(services.EINVALID, services.CodeCapacityExceeded,
			"this conversation already has %d rules, the most a prompt takes: remove one before adding another", services.MaxRuleEntries)
	}
	return out, wrapErr("create constraint", err)
}

// UpdateConstraint changes a rule at its version.
func (s *Store) UpdateConstraint(ctx context.Context, c services.Constraint) (services.Constraint, error) {
	if err := validConstraint(c); err != nil {
		return services.Constraint{}, err
	}
	out, err := scanConstraint(s.db.QueryRow(ctx, `
		UPDATE context_constraints SET text = $4, hard = $5, check_pattern = $6, version = version + 1, updated_at = now()
		WHERE id = $1 AND timeline_scope = $2 AND version = $3
		RETURNING `+constraintColumns, c.ID, c.TimelineScope, c.Version, strings.TrimSpace(c.Text), c.Hard, c.Check))
	if err == pgx.ErrNoRows {
		return services.Constraint{}, s.versionConflict(ctx, "context_constraints", c.TimelineScope, c.ID, c.Version)
	}
	return out, wrapErr("update constraint", err)
}

// DeleteConstraint removes a rule at its version.
func (s *Store) DeleteConstraint(ctx context.Context, timelineScope string, id int64, version int) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM context_constraints WHERE id = $1 AND timeline_scope = $2 AND version = $3`, id, timelineScope, version)
	if err != nil {
		return wrapErr("delete constraint", err)
	}
	if tag.RowsAffected() == 0 {
		return s.versionConflict(ctx, "context_constraints", timelineScope, id, version)
	}
	return nil
}

// versionConflict explains a versioned write that matched no row: the row
// is absent (ENOTFOUND) or at another version (ECONFLICT).
func (s *Store) versionConflict(ctx context.Context, table, timelineScope string, id int64, version int) error {
	var cur int
	err := s.db.QueryRow(ctx, `SELECT version FROM `+table+` WHERE id = $1 AND timeline_scope = $2`, id, timelineScope).Scan(&cur)
	if err == pgx.ErrNoRows {
		return services.Errorf(services.ENOTFOUND, "%s %d not found", strings.TrimSuffix(table, "s"), id)
	}
	if err != nil {
		return wrapErr("read version", err)
	}
	return services.CodedErrorf(services.ECONFLICT, codeConflict,
		"item %d is at version %d, not %d: reload and apply your change again", id, cur, version)
}
