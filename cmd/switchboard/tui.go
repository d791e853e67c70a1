package main

import (
	"context"
	"errors"
	"io"
)

// runTUI starts the terminal client (channels/tui).
func runTUI(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("tui: not built yet")
}
