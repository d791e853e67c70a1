package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/tools"
)

// TestOneResponseCannotWriteUnbounded: one model response with 16 calls
// that each append 1 MiB to a file. The run's bound (8 MiB by default) lets
// 8 through and refuses the rest with an error naming the bound and the
// numbers; the file stays at 8 MiB; the recorded steps keep the large
// arguments by reference; the run's next model request is small.
func TestOneResponseCannotWriteUnbounded(t *testing.T) {
	t.Parallel()
	// Streaming the 16 MiB response takes seconds, minutes under -race on
	// a busy machine: the bounds are generous, nothing here is timed.
	b := setup(t, setupOpts{llmTimeout: 6 * time.Minute})
	// The file exists, so every call appends (no create race between the
	// parallel calls).
	dir := filepath.Join(b.ws, "global")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := `{"path":"big.txt","append":true,"content":"` + strings.Repeat("x", tools.MaxWriteBytes) + `"}`
	// 16 calls of 1 MiB in one response: twice the run's bound. (The
	// hostile trial sent 100; every call past the bound takes the same
	// path, and each megabyte costs seconds under -race beside the rest of
	// the package's tests.)
	const nCalls = 16
	calls := make([]llmtest.ToolCall, nCalls)
	for i := range calls {
		calls[i] = llmtest.ToolCall{Name: "write_file", Arguments: args}
	}
	b.model.Enqueue(llmtest.Reply{ToolCalls: calls}, llmtest.Text("Done."))
	q := b.say(t, "write a lot")
	msgs := b.waitVisibleFor(t, 2, 7*time.Minute)
	if msgs[1].Content != "Done." {
		t.Fatalf("answer: %q", msgs[1].Content)
	}

	info, err := os.Stat(filepath.Join(dir, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != tools.MaxRunWriteBytes {
		t.Fatalf("file is %d bytes, want the run's bound %d", info.Size(), tools.MaxRunWriteBytes)
	}

	run := b.runOf(t, q.ID)
	steps, err := b.store.ListSteps(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	stepBytes, ok, refused := 0, 0, 0
	for _, st := range steps {
		stepBytes += len(st.Payload)
		if st.Kind != services.StepToolResult {
			continue
		}
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(st.Payload, &p)
		switch p.Code {
		case "":
			ok++
		case tools.CodeWriteLimit:
			refused++
		default:
			t.Fatalf("unexpected tool result step: %s", st.Payload)
		}
	}
	if ok != 8 || refused != nCalls-8 {
		t.Fatalf("%d writes done and %d refused, want 8 and %d", ok, refused, nCalls-8)
	}
	if stepBytes > 256<<10 {
		t.Fatalf("the run's steps hold %d bytes of payload; large arguments must be stored by reference", stepBytes)
	}

	reqs := b.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	next := reqs[1].Body
	t.Logf("file %d bytes; run steps %d bytes of payload; next model request %d bytes", info.Size(), stepBytes, len(next))
	if len(next) > 512<<10 {
		t.Fatalf("the next model request is %d bytes; it must not carry the written megabytes again", len(next))
	}
	// The model was told why, with the bound and the numbers; the calls
	// it made are still answered one by one (ids kept).
	for _, want := range []string{"AGENT_MAX_RUN_WRITE_BYTES", "8388608", "this run has written 8388608 bytes", `\"_omitted\"`, "sha256"} {
		if !strings.Contains(string(next), want) {
			t.Fatalf("next request lacks %q: %.2000s", want, next)
		}
	}
	var body struct {
		Messages []struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(next, &body); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range body.Messages {
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		found = true
		if len(m.ToolCalls) != nCalls {
			t.Fatalf("assistant message carries %d calls, want %d", len(m.ToolCalls), nCalls)
		}
		for _, c := range m.ToolCalls {
			var a struct {
				Path    string                  `json:"path"`
				Omitted *tools.OmittedArguments `json:"_omitted"`
			}
			if c.ID == "" || c.Function.Name != "write_file" || json.Unmarshal([]byte(c.Function.Arguments), &a) != nil ||
				a.Path != "big.txt" || a.Omitted == nil || a.Omitted.Bytes != len(args) {
				t.Fatalf("recorded call: id %q name %q arguments %.300s", c.ID, c.Function.Name, c.Function.Arguments)
			}
		}
	}
	if !found {
		t.Fatal("next request has no assistant message with the calls")
	}
}
