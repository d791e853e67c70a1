package agent

import (
	"context"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// RegisterMemoryTool adds the `remember` tool: the agent stores a preference
// of the owner with a confidence; the settings layer sends remembered items
// with every prompt (lowest confidence trimmed first).
func RegisterMemoryTool(reg *tools.Registry, store services.ContextStore) error {
	return reg.Register(tools.Func("remember", services.EffectPersist,
		"Remember a lasting preference or fact about the owner (e.g. key \"language\", value \"answer in French\") so it is in every future prompt. Use a short stable key; storing a key again replaces it.",
		func(ctx context.Context, call tools.Call, args rememberArgs) (tools.Result, error) {
			conf := 0.7
			if args.Confidence != nil {
				conf = *args.Confidence
			}
			// The item records the run and the origin that had tainted it (a
			// tainted run's remember only runs once the owner approved it).
			origin := "the owner's conversation"
			if by := gateOf(ctx).taintedBy(); by != "" {
				origin = "approved by the owner, asked " + by
			}
			item, err := store.UpsertMemory(ctx, services.MemoryItem{TimelineScope: call.TimelineScope,
				Key: strings.ToLower(args.Key), Value: args.Value, Confidence: conf, Source: "agent", RunID: call.RunID, Origin: origin})
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSONResult(map[string]any{"status": "ok", "key": item.Key, "version": item.Version})
		}).WithHistory(tools.HistoryRule{MaxChars: 300}))
}

type rememberArgs struct {
	Key        string   `json:"key" jsonschema:"Short stable name, e.g. language, timezone, name."`
	Value      string   `json:"value" jsonschema:"What to remember."`
	Confidence *float64 `json:"confidence,omitempty" jsonschema:"0 to 1: how sure you are this is a lasting preference. Default 0.7."`
}
