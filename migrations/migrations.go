// Package migrations embeds Switchboard's goose SQL migrations. The files are
// plain goose SQL, so they can also be applied with the goose CLI:
//
//	goose -dir migrations postgres "$DATABASE_URL" up
//
// Released migrations are never edited; a change is a new file.
package migrations

import "embed"

// FS holds every *.sql migration, in version order by file name.
//
//go:embed *.sql
var FS embed.FS
