package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/web"
)

func runServe(ctx context.Context, cfg *Config, log *slog.Logger, stdout io.Writer) error {
	started := time.Now()
	url, stopDB, err := resolveDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopDB()
	pool, err := repository.Open(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := repository.NewMigrator(pool)
	if err != nil {
		return err
	}
	defer migrator.Close()
	if applied, err := migrator.Up(ctx); err != nil {
		return err
	} else if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}

	srv := web.New(web.Options{
		Logger: log,
		Ready: func(ctx context.Context) error {
			if err := pool.Ping(ctx); err != nil {
				return errors.New("database unreachable")
			}
			if pending, err := migrator.Pending(ctx); err != nil || pending {
				return errors.New("migrations not current")
			}
			return nil
		},
	})
	l, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: listen on %s: %w", cfg.HTTPAddr, err)
	}
	log.Info("switchboard serving", "addr", l.Addr().String(), "flags", cfg.FlagMode(),
		"llm_provider", cfg.LLMProvider, "startup_ms", time.Since(started).Milliseconds())
	fmt.Fprintf(stdout, "Switchboard is listening on http://%s (flags: %s, model: %s)\n", l.Addr(), cfg.FlagMode(), cfg.LLMProvider)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log.Info("shutting down")
	return srv.Shutdown(shutdownCtx)
}
