// Package scripts embeds the operator scripts the binary runs itself, so
// `switchboard inspect` and `psql -f scripts/inspect.sql` run the same text.
package scripts

import _ "embed"

// InspectSQL is scripts/inspect.sql: seed 003's appendix queries first, then
// Switchboard's own, each introduced by a "-- name: NAME" comment line.
//
//go:embed inspect.sql
var InspectSQL string
