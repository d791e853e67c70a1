package app_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/mcp"
	"github.com/switchboard/switchboard/services/mcp/mcptest"
	"github.com/switchboard/switchboard/services/prompt"
)

// deferOver is the default of TOOLS_DEFER_OVER (cmd/switchboard).
const deferOver = 2000

// requestTools are the tool names of an OpenAI request body, in order, and
// its system message.
func requestTools(t testing.TB, body []byte) ([]string, string) {
	t.Helper()
	var req struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	system := ""
	for _, m := range req.Messages {
		if m.Role == "system" {
			system += string(m.Content)
		}
	}
	return names, system
}

// toolsJSON is the request's "tools" array as sent.
func toolsJSON(t testing.TB, body []byte) string {
	t.Helper()
	var req struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return string(req.Tools)
}

func everythingReady(t *testing.T, in *apptest.Instance, servers int) {
	t.Helper()
	waitFor(t, "the MCP servers", func() bool {
		_, sv := in.App.Tools().ToolCatalog()
		ready := 0
		for _, s := range sv {
			if s.State == "ready" {
				ready++
			}
		}
		return ready == servers
	})
}

// TestDeferredMCPToolFoundAndCalled: with server-everything configured
// and deferral on, the first request carries the core tools and
// find_tools (with sub-agents on, main's core is the coordinator set:
// delegate and recall_search), not everything__echo, and the system
// prompt lists the server's group and the workspace's; a scripted
// find_tools returns everything__echo and loads it, the next request of the same run carries its definition after the
// core ones (the earlier tools unchanged), and the call of it reaches the
// server. A later run starts from the core set again, and a call of a
// deferred tool named exactly, without find_tools, loads it (one extra
// step, whose result says so) and the run succeeds.
func TestDeferredMCPToolFoundAndCalled(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
		Configure: func(o *app.Config) {
			o.MCP = mcp.Config{"everything": mcptest.Everything(t)}
			o.Agent.ToolsDeferOver = deferOver
		}})
	everythingReady(t, in, 1)

	model.Enqueue(
		llmtest.Call("find_tools", `{"query":"echo a message back"}`),
		llmtest.Call("everything__echo", `{"message":"found and called"}`),
		llmtest.Text("The server echoed."))
	if reply := ask(t, in, "echo something through the server"); reply != "The server echoed." {
		t.Fatalf("answer %q", reply)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	first, system := requestTools(t, reqs[0].Body)
	// With sub-agents on, main's default core is the coordinator set.
	if !slices.Equal(first, []string{"delegate", "recall_search", "find_tools"}) {
		t.Fatalf("first request's tools: %v", first)
	}
	if !strings.Contains(system, "- everything: tools of the MCP server everything (") || !strings.Contains(system, "everything__echo") ||
		!strings.Contains(system, "- schedules: ") || !strings.Contains(system, "- workspace: ") {
		t.Fatalf("the system prompt does not list the deferred groups:\n%s", system)
	}
	if !reqs[1].LastIsToolResult || !strings.Contains(reqs[1].LastMessage, `"name":"everything__echo"`) {
		t.Fatalf("find_tools gave: %s", reqs[1].LastMessage)
	}
	second, system2 := requestTools(t, reqs[1].Body)
	if !slices.Equal(second[:len(first)], first) || !slices.Contains(second[len(first):], "everything__echo") {
		t.Fatalf("second request's tools %v, want %v then the loaded ones", second, first)
	}
	if system2 != system {
		t.Fatal("loading a tool changed the system prompt")
	}
	if !strings.HasPrefix(toolsJSON(t, reqs[1].Body), strings.TrimSuffix(toolsJSON(t, reqs[0].Body), "]")) {
		t.Fatal("the loaded definitions are not appended after the first request's tools")
	}
	if !reqs[2].LastIsToolResult || !strings.Contains(reqs[2].LastMessage, "found and called") {
		t.Fatalf("the echo the model got: %q", reqs[2].LastMessage)
	}

	// A new run: the core set again, and an exact name without searching.
	n := len(model.Requests())
	model.Enqueue(
		llmtest.Call("everything__get-sum", `{"a":19,"b":23}`),
		llmtest.Call("everything__get-sum", `{"a":19,"b":23}`),
		llmtest.Text("It is 42."))
	if reply := ask(t, in, "add 19 and 23 with the server"); reply != "It is 42." {
		t.Fatalf("answer %q", reply)
	}
	reqs = model.Requests()[n:]
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if again, _ := requestTools(t, reqs[0].Body); !slices.Equal(again, first) {
		t.Fatalf("a new run's tools %v, want the core set %v", again, first)
	}
	if !strings.Contains(reqs[1].LastMessage, `"status":"loaded"`) || !strings.Contains(reqs[1].LastMessage, "call it again") {
		t.Fatalf("the unloaded call gave: %q", reqs[1].LastMessage)
	}
	if got, _ := requestTools(t, reqs[1].Body); !slices.Contains(got, "everything__get-sum") {
		t.Fatalf("after the call, tools %v lack everything__get-sum", got)
	}
	if !strings.Contains(reqs[2].LastMessage, "42") {
		t.Fatalf("the second call gave: %q", reqs[2].LastMessage)
	}
}

// TestProfileToolsAndUnderThreshold: a sub-agent profile's request carries
// exactly its tools (no find_tools, no list of deferred groups: three
// tools are under the threshold), and with deferral on such a request is
// byte for byte what it is with deferral off (TOOLS_DEFER_OVER=0, today's
// behaviour). With a threshold over all of main's tools, main's request is
// byte for byte today's too; with the default it is not (the built-ins
// and the server are over it).
func TestProfileToolsAndUnderThreshold(t *testing.T) {
	t.Parallel()
	const huge = 1000000
	bodies, mains := map[int][]byte{}, map[int][]byte{}
	for _, over := range []int{0, deferOver, huge} {
		model := llmtest.NewServer(t)
		in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
			Configure: func(o *app.Config) {
				o.MCP = mcp.Config{"everything": mcptest.Everything(t)}
				o.Agent.ToolsDeferOver = over
				o.Hooks.Context = func(d *prompt.Deps) { d.Now = func() time.Time { return fixedNow } }
				o.Agent.Profiles = map[string]agent.Profile{"researcher": {SystemPrompt: "Research.", Tools: []string{"read_file", "list_files", "everything__echo"}}}
			}})
		everythingReady(t, in, 1)
		model.Enqueue(
			llmtest.Call("delegate", `{"task":"read notes.md","agent_id":"researcher"}`),
			llmtest.Text("Nothing there."),
			llmtest.Text("The researcher found nothing."))
		ask(t, in, "have the researcher read notes.md")
		waitFor(t, "the three model calls", func() bool { return len(model.Requests()) >= 3 })
		var child llmtest.Request
		for _, r := range model.Requests() {
			if strings.Contains(string(r.Body), "Research.") {
				child = r
			}
		}
		mains[over] = model.Requests()[0].Body
		names, system := requestTools(t, child.Body)
		if !slices.Equal(names, []string{"everything__echo", "list_files", "read_file"}) {
			t.Fatalf("the researcher's tools: %v", names)
		}
		if strings.Contains(system, "More tools") {
			t.Fatalf("the researcher's system prompt lists deferred tools:\n%s", system)
		}
		bodies[over] = child.Body
		// Stopped (its pool closed) before the next starts: the test
		// holds one instance's connections, not three (it held 21).
		in.Stop()
	}
	for _, over := range []int{deferOver, huge} {
		if a, b := maskDates(bodies[0]), maskDates(bodies[over]); a != b {
			t.Fatalf("TOOLS_DEFER_OVER=%d: under the threshold the sub-agent's request differs from today's:\n%s\n%s", over, a, b)
		}
	}
	if a, b := maskDates(mains[0]), maskDates(mains[huge]); a != b {
		t.Fatalf("all of main's tools under the threshold, its request differs from today's:\n%s\n%s", a, b)
	}
	if names, _ := requestTools(t, mains[deferOver]); !slices.Contains(names, "find_tools") || slices.Contains(names, "everything__echo") {
		t.Fatalf("with the default threshold main's tools are %v", names)
	}
}

// storedDate is the date a task payload's observation carries: when the
// message was stored, by the database's clock.
var storedDate = regexp.MustCompile(`\\"date\\":\\"[0-9TZ: -]+\\"`)

// maskDates blanks the stored dates of a request body (two instances
// store their messages a few seconds apart); the rest stays byte for byte.
func maskDates(body []byte) string {
	return storedDate.ReplaceAllString(string(body), `\"date\":\"-\"`)
}

// fixedNow is the clock of instances whose request bodies are compared.
var fixedNow = time.Date(2026, 3, 4, 10, 22, 0, 0, time.UTC)

func itoa(n int) string { return strconv.Itoa(n) }

// BenchmarkToolDefinitionTokens reports the tool definitions one main
// request carries (tokens by the project's tokenizer for the request's
// model, characters of the tools JSON, count) with deferral off
// (TOOLS_DEFER_OVER=0) and on (the default), with no MCP server and with
// server-everything (stdio and streamable HTTP) and server-filesystem.
// With sub-agents on, main's default core is tools.CoordinatorCore; the
// _inline runs (AGENT_SUBAGENTS=0) show tools.DefaultCore.
func BenchmarkToolDefinitionTokens(b *testing.B) {
	tok, err := prompt.NewTokenizer("gpt-4o")
	if err != nil {
		b.Fatal(err)
	}
	for _, servers := range []string{"no_mcp", "three_mcp_servers"} {
		for _, mode := range []struct {
			name string
			over int
			sub  bool
		}{{"defer_over_0", 0, true}, {"defer_over_" + itoa(deferOver), deferOver, true}, {"defer_over_" + itoa(deferOver) + "_inline", deferOver, false}} {
			over := mode.over
			b.Run(servers+"/"+mode.name, func(b *testing.B) {
				model := llmtest.NewServer(b)
				cfg := mcp.Config{}
				if servers != "no_mcp" {
					cfg = mcp.Config{"everything": mcptest.Everything(b), "fs": mcptest.Filesystem(b, b.TempDir()),
						"demo": {URL: mcptest.EverythingHTTP(b)}}
				}
				in := apptest.Start(b, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: mode.sub},
					Configure: func(o *app.Config) { o.MCP = cfg; o.Agent.ToolsDeferOver = over }})
				waitFor(b, "the MCP servers", func() bool {
					_, sv := in.App.Tools().ToolCatalog()
					for _, s := range sv {
						if s.State != "ready" {
							return false
						}
					}
					return len(sv) == len(cfg)
				})
				model.Enqueue(llmtest.Text("Hello."))
				ask(b, in, "hello")
				body := model.Requests()[0].Body
				js := toolsJSON(b, body)
				names, system := requestTools(b, body)
				groups := ""
				if i := strings.Index(system, "## More tools"); i >= 0 {
					groups = system[i:]
				}
				all, _ := in.App.Tools().ToolCatalog()
				installed := len(all)
				var specs []struct {
					Function struct {
						Name        string          `json:"name"`
						Description string          `json:"description"`
						Parameters  json.RawMessage `json:"parameters"`
					} `json:"function"`
				}
				if err := json.Unmarshal([]byte(js), &specs); err != nil {
					b.Fatal(err)
				}
				var n, counted int
				for b.Loop() {
					n, counted = tok.Count(js), 0
					for _, sp := range specs {
						counted += prompt.ToolTokens(tok, services.ToolSpec{Name: sp.Function.Name, Description: sp.Function.Description, Parameters: sp.Function.Parameters})
					}
				}
				b.ReportMetric(float64(counted), "counted_tokens/req")
				b.ReportMetric(float64(n), "tool_tokens/req")
				b.ReportMetric(float64(len(js)), "tool_chars/req")
				b.ReportMetric(float64(len(names)), "tools/req")
				b.ReportMetric(float64(installed), "tools_installed")
				b.ReportMetric(float64(tok.Count(groups)), "group_list_tokens")
			})
		}
	}
}
