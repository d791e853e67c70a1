package prompt_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/prompt"
)

// TestPromptPrefixStableTurnToTurn: what changes every turn comes last, so
// a turn's prompt starts with the previous turn's prompt up to the end of
// its history, byte for byte, even with a retrieved layer (which follows
// history now) and with history trimmed (in steps, not one turn a turn).
// The cache points name the ends of the last two past turns: the older one
// is where the previous turn's newer one was.
func TestPromptPrefixStableTurnToTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	seedTurns(t, s, "global", 40, strings.Repeat("talk ", 100))
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Tokenizer: prompt.HeuristicTokenizer{}}, prompt.Config{Window: 6000})
	var prev llm.Request
	trimmedTurns, sameFirst := 0, 0
	for i := range 12 {
		u, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: fmt.Sprintf("question %d %s", i, strings.Repeat("more ", 100)), Visible: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: u.ID,
			Retrieved: []prompt.RetrievedItem{{TimelineScope: "global", Kind: "reference", Title: "ref", Text: fmt.Sprintf("retrieved for turn %d", i), Score: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		req := p.Request
		if n := len(req.Messages); n < 3 || !strings.HasPrefix(req.Messages[n-3].Content, "## Retrieved for this turn") || !strings.Contains(req.Messages[n-1].Content, fmt.Sprintf("question %d", i)) {
			t.Fatalf("turn %d: the retrieved layer and the input are not last: %+v", i, req.Messages[max(0, n-3):])
		}
		if p.Inspection.Layers[4].Trimmed > 0 {
			trimmedTurns++
		}
		if len(req.CacheAt) != 2 || req.CacheAt[1] != len(req.Messages)-4 {
			t.Fatalf("turn %d: cache points %v of %d messages, want the last history message (%d) last", i, req.CacheAt, len(req.Messages), len(req.Messages)-4)
		}
		if i > 0 {
			if req.Messages[0].Content == prev.Messages[0].Content {
				sameFirst++
				// Everything the previous prompt sent before its retrieved
				// layer is this prompt's start, and its last cache point is
				// one of this prompt's.
				end := prev.CacheAt[1]
				if !reflect.DeepEqual(req.Messages[:end+1], prev.Messages[:end+1]) || req.CacheAt[0] != end {
					t.Fatalf("turn %d: the previous turn's history is not this prompt's prefix (cache points %v, previous %v)", i, req.CacheAt, prev.CacheAt)
				}
			}
		}
		// A reply, so the next turn has this one in history.
		if _, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "assistant", Source: "agent", Content: "answer " + fmt.Sprint(i) + strings.Repeat(" said", 100), Visible: true,
			Metadata: []byte(fmt.Sprintf(`{"reply_to":%d}`, u.ID))}); err != nil {
			t.Fatal(err)
		}
		prev = req
	}
	if trimmedTurns < 10 {
		t.Fatalf("history trimmed in %d of 12 turns: the test needs a window that trims", trimmedTurns)
	}
	// Trimming one turn a turn would change the first message every turn.
	if sameFirst < 8 {
		t.Fatalf("the first history message stayed the same in %d of 11 turns, want most (trimming in steps)", sameFirst)
	}
}
