package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services"
)

// runPair handles `switchboard pair list` and `switchboard pair approve
// CODE`: the owner's side of Telegram pairing, from a shell.
func runPair(ctx context.Context, cfg *Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] == "approve" && len(args) != 2) || (args[0] == "list" && len(args) != 1) ||
		(args[0] != "approve" && args[0] != "list") {
		return fmt.Errorf("pair needs: list | approve CODE")
	}
	pool, closeDB, err := openDatabase(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer closeDB()
	pairings := repository.NewTelegramStore(pool)
	if args[0] == "approve" {
		// Through the Desk, so the stranger is told in their chat (the
		// serving process's outbound worker sends it).
		desk, done, err := app.NewPairingDesk(ctx, pool, cfg.TelegramOwnerIDs, log)
		if err != nil {
			return err
		}
		defer done()
		p, err := desk.ApprovePairing(ctx, args[1])
		if err != nil {
			return err
		}
		if _, err := repository.New(pool).AppendAudit(ctx, services.PairingAudit("cli", "approved", p)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Approved %s (Telegram user %d): they talk in timeline %s.\n", p.DisplayName, p.UserID, p.TimelineScope)
		return nil
	}
	list, err := pairings.ListPairings(ctx)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "No Telegram pairings.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER ID\tNAME\tTIMELINE\tSTATUS")
	for _, p := range list {
		status := "waiting, code valid until " + p.ExpiresAt.Local().Format("15:04")
		if p.ApprovedAt != nil {
			status = "approved " + p.ApprovedAt.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.UserID, p.DisplayName, p.TimelineScope, status)
	}
	return tw.Flush()
}
