package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/switchboard/switchboard/app"
)

// runServe builds the app from the configuration, starts it and serves
// until ctx ends.
func runServe(ctx context.Context, cfg *Config, log *slog.Logger, stdout io.Writer) error {
	started := time.Now()
	url, stopDB, err := resolveDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopDB()
	a, err := app.New(ctx, cfg.AppConfig(url, log, stdout))
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		log.Info("shutting down")
		a.Close(stopCtx)
	}()
	if err := a.Start(ctx); err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: listen on %s: %w", cfg.HTTPAddr, err)
	}
	log.Info("switchboard serving", "addr", l.Addr().String(), "flags", a.Config().Agent.Flags.Mode(),
		"llm_provider", cfg.LLMProvider, "startup_ms", time.Since(started).Milliseconds())
	fmt.Fprintf(stdout, "Switchboard is listening on http://%s (flags: %s, model: %s)\n", l.Addr(), a.Config().Agent.Flags.Mode(), cfg.LLMProvider)
	errc := make(chan error, 1)
	go func() { errc <- a.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
}
