package tools

import (
	"context"

	"github.com/switchboard/switchboard/services"
)

// What the agent's tools are given of the rest of the service: small
// interfaces the app fills with the store and the chat service when it
// builds the tool list (app/tools.go).

// RunReader reads a run (the store).
type RunReader interface {
	GetRun(ctx context.Context, id int64) (services.Run, error)
}

// Poster posts a message to a timeline as services.ChatService does: the
// tools that tell the owner something (send_file, propose_rule).
type Poster interface {
	Post(ctx context.Context, p services.PostParams) (services.Message, bool, error)
}

// TriggerOf is the user message a run (or the run it was delegated from)
// answers, 0 when unknown.
func TriggerOf(ctx context.Context, runs RunReader, runID int64) int64 {
	for range 8 {
		r, err := runs.GetRun(ctx, runID)
		if err != nil {
			return 0
		}
		if r.TriggerMessageID != 0 || r.ParentRunID == 0 {
			return r.TriggerMessageID
		}
		runID = r.ParentRunID
	}
	return 0
}
