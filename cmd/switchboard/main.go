// Command switchboard runs the Switchboard service and its admin verbs. This
// package only wires: it parses the configuration, opens the database and
// hands app.New the options Config maps from the environment.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `Switchboard: talk to one LLM agent from Telegram, the web and a terminal,
all on one shared timeline in PostgreSQL.

Usage:
  switchboard [serve]              run the service (the default)
  switchboard migrate up|down|status
                                   apply, roll back one, or list database migrations
  switchboard token reset          replace the generated owner login token (prints the new one)
  switchboard pair list|approve CODE
                                   Telegram users waiting for approval; approve one by its code
  switchboard tui [flags]          terminal client of a running server (switchboard tui --help)
  switchboard audit [--since DURATION] [--json]
                                   list the audit trail (oldest first; --since 7d, 12h, 90m)
  switchboard audit verify         check the audit trail's hash chain: "ok, N entries" or the first broken row
  switchboard inspect [NAME] [--json]
                                   run repository/inspect.sql's named queries read-only (--list names them)
  switchboard context --mode index|timeline|detail|map [--task-id RUN] [--ids m12,s3] [--query WORDS] [--profile NAME]
                                   print the context payload (context_payload.v2) as one JSON object
  switchboard help                 this text

With no configuration, serve uses the PostgreSQL on 127.0.0.1:5432 if one
answers, else starts a private cluster under DATA_DIR, and answers with an
offline model that explains how to configure a real one.

Environment:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	verb := "serve"
	if len(args) > 0 {
		verb, args = args[0], args[1:]
	}
	switch verb {
	case "help", "-h", "--help":
		printUsage(stdout)
		return nil
	case "tui":
		// The TUI is a client: it reads its own flags and env, not the server's.
		return runTUI(ctx, args, getenv, stdout, stderr)
	case "serve", "migrate", "token", "pair", "inspect", "audit", "context":
	default:
		printUsage(stderr)
		return fmt.Errorf("unknown command %q", verb)
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	switch verb {
	case "migrate":
		return runMigrate(ctx, cfg, log, args, stdout)
	case "token":
		return runToken(ctx, cfg, log, args, stdout)
	case "pair":
		return runPair(ctx, cfg, log, args, stdout)
	case "inspect":
		return runInspect(ctx, cfg, log, args, stdout)
	case "audit":
		return runAudit(ctx, cfg, log, args, stdout)
	case "context":
		return runContext(ctx, cfg, log, args, stdout, stderr)
	default:
		if len(args) > 0 {
			return fmt.Errorf("serve takes no arguments, got %q (configure it with environment variables; see switchboard help)", strings.Join(args, " "))
		}
		return runServe(ctx, cfg, log, stdout)
	}
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	for _, v := range envTable() {
		def := v.Default
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(w, "  %-28s default %s\n      %s\n", v.Name, def, v.Help)
	}
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
