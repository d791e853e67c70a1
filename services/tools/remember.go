package tools

import (
	"context"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// RegisterRemember adds the `remember` tool: the agent stores a preference
// of the owner with a confidence in store; the settings layer sends
// remembered items with every prompt (lowest confidence trimmed first).
func RegisterRemember(reg *Registry, store services.ContextStore) error {
	return reg.Register(Func("remember", services.EffectPersist,
		"Remember a lasting preference or fact about the owner (e.g. key \"language\", value \"answer in French\") so it is in every future prompt. Use a short stable key; storing a key again replaces it.",
		func(ctx context.Context, call Call, args rememberArgs) (Result, error) {
			conf := 0.7
			if args.Confidence != nil {
				conf = *args.Confidence
			}
			// The item records the run and the origin that had tainted it (a
			// tainted run's remember only runs once the owner approved it).
			origin := "the owner's conversation"
			if by := call.TaintedBy; by != "" {
				origin = "approved by the owner, asked " + by
			}
			item, err := store.UpsertMemory(ctx, services.MemoryItem{TimelineScope: call.TimelineScope,
				Key: strings.ToLower(args.Key), Value: args.Value, Confidence: conf, Source: "agent", RunID: call.RunID, Origin: origin})
			if err != nil {
				return Result{}, err
			}
			return JSONResult(map[string]any{"status": "ok", "key": item.Key, "version": item.Version})
		}).WithHistory(HistoryRule{MaxChars: 300}))
}

type rememberArgs struct {
	Key        string   `json:"key" jsonschema:"Short stable name, e.g. language, timezone, name."`
	Value      string   `json:"value" jsonschema:"What to remember."`
	Confidence *float64 `json:"confidence,omitempty" jsonschema:"0 to 1: how sure you are this is a lasting preference. Default 0.7."`
}
