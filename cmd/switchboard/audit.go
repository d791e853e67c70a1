package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services"
)

const auditUsage = `switchboard audit [--since DURATION] [--json]
switchboard audit verify [--json]

Lists the audit trail oldest first (every row, or those of the last
DURATION: 90m, 12h, 7d), as a table or as JSON with --json. verify walks the
hash chain from the first row and prints "ok, N entries", or the first row
whose link does not hold and what mismatched (exit status 1).`

// auditArgs is the parsed command line of `switchboard audit`.
type auditArgs struct {
	verify, asJSON, help bool
	since                time.Duration
}

func parseAuditArgs(args []string) (auditArgs, error) {
	var a auditArgs
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; arg {
		case "verify":
			a.verify = true
		case "--json", "-json":
			a.asJSON = true
		case "-h", "--help", "help":
			a.help = true
		case "--since", "-since":
			if i+1 == len(args) {
				return a, fmt.Errorf("audit: --since needs a duration (90m, 12h, 7d)")
			}
			i++
			d, err := parseSince(args[i])
			if err != nil {
				return a, err
			}
			a.since = d
		default:
			if v, ok := strings.CutPrefix(arg, "--since="); ok {
				d, err := parseSince(v)
				if err != nil {
					return a, err
				}
				a.since = d
				continue
			}
			return a, fmt.Errorf("audit: unknown argument %q (want verify, --since DURATION or --json)", arg)
		}
	}
	if a.verify && a.since != 0 {
		return a, fmt.Errorf("audit verify checks the whole chain; --since is for listing")
	}
	return a, nil
}

// parseSince reads a Go duration or a number of days ("7d").
func parseSince(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days > 0 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("audit: --since %q is not a positive duration (examples: 90m, 12h, 7d)", v)
}

// runAudit handles `switchboard audit` and `switchboard audit verify`. It
// only reads the audit trail (it migrates first, so the table exists).
func runAudit(ctx context.Context, cfg *Config, log *slog.Logger, args []string, stdout io.Writer) error {
	a, err := parseAuditArgs(args)
	if err != nil {
		return err
	}
	if a.help {
		fmt.Fprintln(stdout, auditUsage)
		return nil
	}
	pool, closeDB, err := openDatabase(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer closeDB()
	store := repository.New(pool)
	if a.verify {
		return auditVerify(ctx, store, a.asJSON, stdout)
	}
	var since time.Time
	if a.since > 0 {
		since = time.Now().Add(-a.since)
	}
	list, err := store.ListAudit(ctx, since, 0)
	if err != nil {
		return err
	}
	if a.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	return printAuditTable(stdout, list)
}

// auditVerify prints the verdict; a broken chain is an error (exit 1).
func auditVerify(ctx context.Context, store *repository.Store, asJSON bool, stdout io.Writer) error {
	v, err := store.VerifyAuditChain(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
	} else if v.Broken == nil {
		fmt.Fprintf(stdout, "ok, %d entries\nhead %s\n", v.Checked, v.Head)
	} else {
		fmt.Fprintf(stdout, "broken at row %d (%d entries before it are intact)\n%s\n", v.Broken.ID, v.Checked, v.Reason)
	}
	if v.Broken != nil {
		return fmt.Errorf("audit chain broken at row %d", v.Broken.ID)
	}
	return nil
}

func printAuditTable(w io.Writer, list []services.AuditEntry) error {
	if len(list) == 0 {
		fmt.Fprintln(w, "No audit entries.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tACTOR\tCHANNEL\tACTION\tSUBJECT\tSTATUS\tRUN\tDETAIL")
	for _, e := range list {
		run := ""
		if e.RunID != 0 {
			run = strconv.FormatInt(e.RunID, 10)
		}
		detail := string(e.Detail)
		if detail == "{}" {
			detail = ""
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.Local().Format("2006-01-02 15:04:05"), e.Actor,
			dash(e.Channel), e.Action, dash(e.Subject), dash(e.Status), dash(run), cutRunes(detail, 80))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cutRunes(s string, n int) string {
	r := []rune(strings.ReplaceAll(s, "\n", " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}
