package repository_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
)

// BenchmarkModelCallStep is the write cost of recording one model call:
// the step alone, and the step with the exact request (gzip included) in
// one statement. The request is a 40-turn prompt of about 60 KB.
func BenchmarkModelCallStep(b *testing.B) {
	ctx := context.Background()
	s := dbtest.Store(b)
	msg, _, err := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: "q", Visible: true})
	if err != nil {
		b.Fatal(err)
	}
	run, err := s.CreateRun(ctx, services.NewRun{TimelineScope: "global", ContextScope: "main", TriggerMessageID: msg.ID, Source: "web", Status: services.RunRunning})
	if err != nil {
		b.Fatal(err)
	}
	// Varied text (a fixed pseudo-random walk over a vocabulary), so the
	// compression ratio is that of prose, not of a repeated line.
	words := strings.Fields("the queue worker timeline summary cursor compaction model prompt budget tokens answer question file path config restart service database index scope agent tool result error retry window cache prefix rules settings owner channel telegram web page terminal schedule fire notification handoff run step")
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	var msgs []map[string]string
	for i := 0; i < 40; i++ {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("question %d: %s", i, text(120))},
			map[string]string{"role": "assistant", "content": fmt.Sprintf("answer %d: %s", i, text(100))})
	}
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": msgs})
	payload := json.RawMessage(`{"model":"gpt-4o-mini","usage":{"PromptTokens":15000}}`)
	b.Run("step", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.AppendStep(ctx, run.ID, services.StepModelCall, payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step+request", func(b *testing.B) {
		var gz int
		for b.Loop() {
			z := agent.Gzip(body) // as the agent stores it
			gz = len(z)
			if _, err := s.AppendStepWithRequest(ctx, run.ID, services.StepModelCall, payload, services.RunRequest{
				TimelineScope: "global", ContextScope: "main", Provider: "openai", Model: "gpt-4o-mini", Bytes: len(body), Gzip: z}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(body)), "body-bytes")
		b.ReportMetric(float64(gz), "gzip-bytes")
	})
}
