package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// BenchmarkDelegatedResearch runs one scripted workload of 20 delegated
// research tasks (each reads three 3 KB source files, then reports) with
// sub-agents on, and inline in main (AGENT_SUBAGENTS=0), and reports the
// main scope's prompt tokens per turn: the provider-reported prompt tokens
// of the main runs (their own model calls and, inline, the task's; the
// fake model counts a token per 4 bytes of the request), averaged over the
// turns. Of those,
// tool-def-tokens/turn are the tool definitions' share (the "tools" field
// of the same requests, counted the same way). The _deferred modes defer
// the tools outside the core set (TOOLS_DEFER_OVER=2000, the default). Run:
//
//	go test -run '^$' -bench DelegatedResearch -benchtime 1x ./services/agent/
func BenchmarkDelegatedResearch(b *testing.B) {
	for _, mode := range []struct {
		name      string
		flags     services.Flags
		deferOver int
	}{
		{"subagents", services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true}, 0},
		{"inline", services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: false}, 0},
		{"subagents_deferred", services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true}, 2000},
		{"inline_deferred", services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: false}, 2000},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				perTurn, last, toolDefs := delegatedWorkload(b, mode.flags, mode.deferOver)
				b.ReportMetric(perTurn, "main-prompt-tokens/turn")
				b.ReportMetric(float64(last), "main-prompt-tokens-turn20")
				b.ReportMetric(toolDefs, "tool-def-tokens/turn")
			}
		})
	}
}

func delegatedWorkload(b *testing.B, flags services.Flags, deferOver int) (float64, int, float64) {
	bd := setupBench(b, flags, deferOver)
	ws := filepath.Join(bd.ws, "global")
	_ = os.MkdirAll(ws, 0o700)
	for i := 0; i < 3; i++ {
		_ = os.WriteFile(filepath.Join(ws, fmt.Sprintf("source%d.md", i)), []byte(strings.Repeat(fmt.Sprintf("fact %d about the topic; ", i), 120)), 0o600)
	}
	bd.model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		body := string(r.Body)
		if isChildCall(r) || strings.Contains(body, "Task payload") {
			n := strings.Count(body, `"role":"tool"`)
			if n < 3 {
				return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "read_file", Arguments: fmt.Sprintf(`{"path":"source%d.md"}`, n)}}}
			}
			return llmtest.Text("Summary: the three sources agree on the facts.")
		}
		if r.LastIsToolResult {
			return llmtest.Text("Here is the research summary.")
		}
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "delegate", Arguments: `{"task":"research the topic in source0-2.md"}`}}}
	})
	for i := 0; i < 20; i++ {
		bd.sayB(b, fmt.Sprintf("research task %d", i))
		bd.waitAnswers(b, i+1)
	}
	runs, _ := bd.store.ListRuns(context.Background(), services.RunQuery{TimelineScope: "global", Limit: 1000})
	total, n, last := 0, 0, 0
	for _, r := range runs {
		if r.ParentRunID == 0 {
			total += r.PromptTokens
			n++
			if last == 0 {
				last = r.PromptTokens
			}
		}
	}
	defs := 0
	for _, r := range mainRequests(bd) {
		var body struct {
			Tools json.RawMessage `json:"tools"`
		}
		_ = json.Unmarshal(r.Body, &body)
		defs += len(body.Tools) / 4
	}
	return float64(total) / float64(n), last, float64(defs) / float64(n)
}
