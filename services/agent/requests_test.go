package agent_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStoredRequestIsWhatTheModelReceived: each model call of a run keeps
// the exact request body the provider sent, byte for byte what the model
// server received, tied to its model_call step; listed per run and per
// scope; pruned by retention.
func TestStoredRequestIsWhatTheModelReceived(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(llmtest.Call("write_file", `{"path":"a.txt","content":"hello"}`), llmtest.Text("done"))
	q := b.say(t, "write a file")
	b.waitVisible(t, 2)
	run := b.runOf(t, q.ID)
	ctx := context.Background()
	list, err := b.store.ListRunRequests(ctx, services.RunRequestQuery{RunID: run.ID})
	if err != nil || len(list) != 2 {
		t.Fatalf("%d requests stored for the run (%v), want 2", len(list), err)
	}
	got := b.model.Requests()
	if len(got) != 2 {
		t.Fatalf("the model received %d requests", len(got))
	}
	steps, _ := b.store.ListSteps(ctx, run.ID)
	kinds := map[int64]services.StepKind{}
	for _, st := range steps {
		kinds[st.ID] = st.Kind
	}
	for i, r := range list {
		full, err := b.store.GetRunRequest(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		body := gunzip(t, full.Gzip)
		want := got[len(got)-1-i].Body // newest first
		if !bytes.Equal(body, want) {
			t.Fatalf("stored request %d differs from what the model received:\n%s\n---\n%s", i, body, want)
		}
		if full.Bytes != len(want) || len(full.Gzip) >= len(want) && len(want) > 1000 {
			t.Fatalf("request %d: %d bytes recorded, %d gzip, body %d", i, full.Bytes, len(full.Gzip), len(want))
		}
		if kinds[full.StepID] != services.StepModelCall || full.TimelineScope != "global" || full.ContextScope != "main" || full.Provider != "openai" {
			t.Fatalf("request %d: %+v (step kind %q)", i, full, kinds[full.StepID])
		}
	}
	byScope, err := b.store.ListRunRequests(ctx, services.RunRequestQuery{TimelineScope: "global", ContextScope: "main"})
	if err != nil || len(byScope) != 2 || byScope[0].ID != list[0].ID {
		t.Fatalf("per scope: %d (%v)", len(byScope), err)
	}
	// Retention: requests older than the cut are deleted, others stay.
	if n, err := b.store.PruneRunRequests(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned %d fresh requests (%v)", n, err)
	}
	if n, err := b.store.PruneRunRequests(ctx, time.Now().Add(time.Minute)); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	if _, err := b.store.GetRunRequest(ctx, list[0].ID); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("a pruned request: %v", err)
	}
	// The steps (and the conversation) stay.
	if after, _ := b.store.ListSteps(ctx, run.ID); len(after) != len(steps) {
		t.Fatal("pruning requests removed steps")
	}
}
