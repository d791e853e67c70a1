package tui

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// RunOptions configures Run.
type RunOptions struct {
	URL, Token string
	// In and Out are the terminal (default: the process's stdin/stdout).
	In  io.Reader
	Out io.Writer
}

// Run connects to the server and runs the terminal UI until the user quits or
// ctx ends. Errors that stop it from starting (bad URL, no token, the server
// refusing the token or not answering) come back as one clear line.
func Run(ctx context.Context, o RunOptions) error {
	client, err := NewClient(o.URL, o.Token)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	page, err := client.Timeline(lctx, TimelineQuery{Limit: PageSize})
	cancel()
	if err != nil {
		return err
	}
	model := NewModel(client, Options{Initial: page, ServerURL: client.BaseURL()})
	opts := []tea.ProgramOption{tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithContext(ctx)}
	if o.In != nil {
		opts = append(opts, tea.WithInput(o.In))
	}
	if o.Out != nil {
		opts = append(opts, tea.WithOutput(o.Out))
	}
	p := tea.NewProgram(model, opts...)

	fctx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	feed := &Feed{Client: client, Send: func(msg any) { p.Send(msg) }}
	go feed.Run(fctx, model.NewestID())

	_, err = p.Run()
	stopFeed()
	if errors.Is(err, tea.ErrInterrupted) || (errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil) {
		err = nil // SIGINT or SIGTERM: a normal way to leave
	}
	if err == nil {
		if n := len(model.Unsent()); n > 0 {
			return errors.New("left with unsent messages; the server may not have stored them: " + quoteAll(model.Unsent()))
		}
	}
	return err
}

func quoteAll(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(ansi.Truncate(s, 60, "…"))
	}
	return out
}
