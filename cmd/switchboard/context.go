package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/payload"
)

const contextUsage = `switchboard context --mode index|timeline|detail|map [--task-id RUN] [--ids m12,s3] [--query WORDS] [--profile NAME] [--timeline NAME]

Prints the context payload (context_payload.v2, docs/CONTEXT.md "The context
payload") of the owner's conversation as one JSON object on stdout, nothing
else; diagnostics go to stderr. index: the rows most relevant to --query (or
the newest), summaries only; timeline: the newest rows of --task-id's run
(or of the conversation), oldest first; detail: the rows and summaries
--ids names, whole (over budget it degrades to timeline, then index); map:
the workspace's files, headings and top-level symbols. --profile is a
sub-agent profile of AGENT_PROFILES (its budgets).`

// runContext handles `switchboard context`: the app is built as serve
// builds it (migrated database, workspace, recall), nothing is started,
// and the payload is written to stdout.
func runContext(ctx context.Context, cfg *Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("context", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, contextUsage) }
	mode := fs.String("mode", payload.ModeIndex, "index, timeline, detail or map")
	taskID := fs.String("task-id", "", "a run id (r12 or 12)")
	ids := fs.String("ids", "", "recall ids for detail, comma-separated (m12,s3)")
	query := fs.String("query", "", "words the index ranks by")
	profile := fs.String("profile", "", "a sub-agent profile (AGENT_PROFILES)")
	timeline := fs.String("timeline", services.DefaultTimeline, "the conversation (timeline scope)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return fmt.Errorf("context: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("context: unexpected argument %q (see switchboard context --help)", fs.Arg(0))
	}
	url, stopDB, err := resolveDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopDB()
	// stdout is the payload's alone: anything the app would print goes to
	// stderr.
	a, err := app.New(ctx, cfg.AppConfig(url, log, stderr))
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Close(closeCtx)
	}()
	var idList []string
	for _, id := range strings.Split(*ids, ",") {
		if id = strings.TrimSpace(id); id != "" {
			idList = append(idList, id)
		}
	}
	p, err := a.Payloads().Build(ctx, payload.Params{Timeline: *timeline, Mode: *mode, TaskID: *taskID, IDs: idList, Query: *query, Profile: *profile})
	if err != nil {
		return fmt.Errorf("context: %s", services.ErrorMessage(err))
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(p)
}
