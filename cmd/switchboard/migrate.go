package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchboard/switchboard/repository"
)

func runMigrate(ctx context.Context, cfg *Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 1 || (args[0] != "up" && args[0] != "down" && args[0] != "status") {
		return fmt.Errorf("migrate needs one of up, down, status")
	}
	pool, closeDB, err := openDatabase(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer closeDB()
	m, err := repository.NewMigrator(pool)
	if err != nil {
		return err
	}
	defer m.Close()
	switch args[0] {
	case "up":
		applied, err := m.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "applied %d migration(s) %v\n", len(applied), applied)
	case "down":
		v, err := m.Down(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rolled back migration %d\n", v)
	case "status":
		st, err := m.Status(ctx)
		if err != nil {
			return err
		}
		for _, s := range st {
			state := "pending"
			if s.Applied {
				state = "applied"
			}
			fmt.Fprintf(stdout, "%05d  %-8s %s\n", s.Version, state, s.Name)
		}
	}
	return nil
}
