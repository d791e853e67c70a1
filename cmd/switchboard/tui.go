package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/switchboard/switchboard/channels/tui"
)

const tuiUsage = `Usage: switchboard tui [--url URL] [--token TOKEN]

A terminal client of a running Switchboard server: the shared timeline with a
label per channel, live updates, streaming answers, and a composer (messages
you send are labelled tui). It reconnects by itself when the server restarts.

Flags:
  --url URL      the server's address (env SWITCHBOARD_URL, default %s)
  --token TOKEN  the owner's token: the server's WEB_AUTH_TOKEN, or the one it
                 printed at first start (env SWITCHBOARD_TOKEN). Prefer the
                 environment variable: flags show up in the process list.

Keys: Enter sends, Alt+Enter or Ctrl+J adds a line, PgUp/PgDn or the mouse
wheel scroll (PgUp at the top loads older messages), Ctrl+C or /quit leaves.
Type /help inside for the chat commands (/new /stop /status /context
/compact [focus] /subagents). See docs/TUI.md.
`

const defaultTUIURL = "http://127.0.0.1:8080"

// runTUI starts the terminal client (channels/tui).
func runTUI(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("switchboard tui", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := getenv("SWITCHBOARD_URL")
	if url == "" {
		url = defaultTUIURL
	}
	fs.StringVar(&url, "url", url, "server address")
	token := fs.String("token", getenv("SWITCHBOARD_TOKEN"), "owner token")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, tuiUsage, defaultTUIURL)
			return nil
		}
		fmt.Fprintf(stderr, tuiUsage, defaultTUIURL)
		return fmt.Errorf("tui: %v", err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, tuiUsage, defaultTUIURL)
		return fmt.Errorf("tui takes no arguments, got %q", fs.Args())
	}
	return tui.Run(ctx, tui.RunOptions{URL: url, Token: *token, In: os.Stdin, Out: stdout})
}
