package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web"
)

// runToken handles `switchboard token reset`: a new owner token replaces the
// stored hash (for when the printed one is lost). Running servers read the
// stored hash on every authentication, so the new token works and the old
// one stops at once on every instance; sessions made with the old token end
// too. The printed link is PUBLIC_URL (default http://HTTP_ADDR) of this
// command's environment: run it with the servers' settings.
func runToken(ctx context.Context, cfg *Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 1 || args[0] != "reset" {
		return fmt.Errorf("token needs: reset")
	}
	if cfg.WebAuthToken != "" {
		return fmt.Errorf("WEB_AUTH_TOKEN is set, so the token is the one in the environment; change it there")
	}
	pool, closeDB, err := openDatabase(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer closeDB()
	tok := web.NewToken()
	store := repository.New(pool)
	if err := store.ReplaceOwnerTokenHash(ctx, web.HashToken(tok)); err != nil {
		return err
	}
	// Browser sessions made with the old token end too.
	if err := store.DeleteAllSessions(ctx); err != nil {
		return err
	}
	if _, err := store.AppendAudit(ctx, services.AuditEntry{Actor: "owner", Channel: "cli", Action: services.AuditTokenReset,
		Subject: "owner token", Status: "ok", Detail: services.AuditDetail(map[string]any{"sessions_ended": true})}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "New owner token (shown once; it replaces the old one at once on every running server):\n  %s\nLog in at:\n  %s/login?token=%s\n", tok, cfg.PublicURL, tok)
	return nil
}
