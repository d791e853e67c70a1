package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestMain is apptest.Main, then stops the browser the tests share.
func TestMain(m *testing.M) { apptest.Main(m, browsertest.Close) }

// TestModelToldWhileMCPServersStart: right after a start, a server still
// starting has no tools in the model's list; the model is told which
// servers are starting (so it can tell the owner instead of doing without
// them silently), and /tools shows the state.
func TestModelToldWhileMCPServersStart(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
		Configure: func(o *app.Config) {
			// A server that never answers its handshake stays "starting"
			// for the 30 s the handshake may take.
			o.MCP = mcp.Config{"slowfs": {Command: "sleep", Args: []string{"120"}}}
		}})
	model.Enqueue(llmtest.Text("Those tools are starting; ask again in a moment."))
	ask(t, in, "list the files of my drive")
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests, want 1", len(reqs))
	}
	if body := string(reqs[0].Body); !strings.Contains(body, "Tools still starting") || !strings.Contains(body, "slowfs") {
		t.Fatalf("the model was not told that slowfs is starting:\n%.2000s", body)
	}
	if _, servers := in.App.Tools().ToolCatalog(); len(servers) != 1 || servers[0].State != "starting" {
		t.Fatalf("servers: %+v", servers)
	}
}

// TestMCPToolInAConversation: with server-everything configured, the
// model is offered everything__echo, calls it, and the server's answer
// reaches the model; GET /api/tools and /tools list the server's tools; a
// sub-agent profile that does not name the server is neither offered its
// tools nor able to call them by name.
func TestMCPToolInAConversation(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
		Configure: func(o *app.Config) {
			o.MCP = mcp.Config{"everything": mcptest.Everything(t), "ghost": {Command: "/nonexistent/mcp-server"}}
			o.Agent.Profiles = map[string]agent.Profile{"researcher": {SystemPrompt: "Research.", Tools: []string{"read_file"}}}
		}})
	waitFor(t, "the MCP server", func() bool {
		_, servers := in.App.Tools().ToolCatalog()
		return len(servers) == 2 && servers[0].State == "ready" && servers[1].State == "down"
	})

	model.Enqueue(llmtest.Call("everything__echo", `{"message":"pinged through MCP"}`), llmtest.Text("The server answered."))
	ask(t, in, "ping the server")
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), `"everything__echo"`) {
		t.Fatal("the model was not offered everything__echo")
	}
	if strings.Contains(string(reqs[0].Body), "Tools still starting") {
		t.Fatal("the model was told servers are starting when one is ready and one down")
	}
	if !reqs[1].LastIsToolResult || !strings.Contains(reqs[1].LastMessage, "pinged through MCP") {
		t.Fatalf("the tool result the model got: %q", reqs[1].LastMessage)
	}

	// The owner's view of the tools.
	req, _ := http.NewRequest("GET", in.URL+"/api/tools", nil)
	req.Header.Set("Authorization", "Bearer "+in.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Tools   []services.ToolInfo
		Servers []services.ToolServerInfo
	}
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/tools: %d %s", resp.StatusCode, body)
	}
	found := map[string]services.ToolInfo{}
	for _, ti := range list.Tools {
		found[ti.Name] = ti
	}
	if e := found["everything__echo"]; e.Source != "everything" || e.State != "ready" {
		t.Fatalf("everything__echo in /api/tools: %+v", e)
	}
	if r := found["read_file"]; r.Source != "builtin" || r.State != "ready" {
		t.Fatalf("read_file in /api/tools: %+v", r)
	}
	if len(list.Servers) != 2 || list.Servers[0].Name != "everything" || list.Servers[0].Tools == 0 ||
		list.Servers[1].State != "down" || !strings.Contains(list.Servers[1].Error, "could not start") {
		t.Fatalf("servers in /api/tools: %+v", list.Servers)
	}
	if reply := ask(t, in, "/tools"); !strings.Contains(reply, "MCP server everything (stdio, ready)") || !strings.Contains(reply, "echo") ||
		!strings.Contains(reply, "MCP server ghost (stdio, down)") {
		t.Fatalf("/tools: %q", reply)
	}
	if reply := ask(t, in, "/status"); !strings.Contains(reply, "MCP server ghost is down (could not start") || strings.Contains(reply, "everything") {
		t.Fatalf("/status: %q", reply)
	}
	req, _ = http.NewRequest("GET", in.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+in.Token)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `switchboard_mcp_calls_total{result="ok",server="everything"} 1`) {
		t.Fatalf("metrics lack the MCP call:\n%s", grepLines(string(body), "mcp"))
	}

	// A paired Telegram user's conversation is not offered the owner's
	// MCP servers (not marked shared).
	n := len(model.Requests())
	model.Enqueue(llmtest.Text("Hello."))
	if _, _, err := in.Chat.Post(context.Background(), services.PostParams{TimelineScope: "tg:42", Source: services.SourceTelegram,
		Content: "what tools do you have?", Metadata: services.MessageMeta{TelegramMeta: services.TelegramMeta{ChatID: 42, MessageID: 7}}.Encode()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the paired user's model request", func() bool { return len(model.Requests()) > n })
	if body := string(model.Requests()[n].Body); strings.Contains(body, "everything__") || !strings.Contains(body, `"read_file"`) {
		t.Fatal("a paired user's conversation was offered the owner's MCP tools (or no built-in tools)")
	}

	// A sub-agent whose profile names only read_file.
	waitFor(t, "the paired user's run to end", func() bool {
		runs, err := in.Store.ListRuns(context.Background(), services.RunQuery{TimelineScope: "tg:42", Limit: 10})
		if err != nil || len(runs) == 0 {
			return false
		}
		for _, r := range runs {
			if r.FinishedAt == nil {
				return false
			}
		}
		return true
	})
	n = len(model.Requests())
	model.Enqueue(
		llmtest.Call("delegate", `{"task":"ping the server","agent_id":"researcher"}`),
		llmtest.Call("everything__echo", `{"message":"from the sub-agent"}`),
		llmtest.Text("I could not reach it."),
		llmtest.Text("The researcher could not reach it."))
	ask(t, in, "have the researcher ping the server")
	waitFor(t, "the main agent's last model call", func() bool { return len(model.Requests()) >= n+4 })
	reqs = model.Requests()[n:]
	if len(reqs) != 4 {
		t.Fatalf("%d model requests for the delegation, want 4", len(reqs))
	}
	child := reqs[1]
	if strings.Contains(string(child.Body), "everything__echo") {
		t.Fatal("the researcher profile was offered everything__echo")
	}
	if !reqs[2].LastIsToolResult || !strings.Contains(reqs[2].LastMessage, "not available here") || strings.Contains(reqs[2].LastMessage, "from the sub-agent") {
		t.Fatalf("the researcher's call of everything__echo gave: %q", reqs[2].LastMessage)
	}
}

// ask posts text as the owner and returns the answer's text.
func ask(t testing.TB, in *apptest.Instance, text string) string {
	t.Helper()
	ctx := context.Background()
	msg, _, err := in.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceWeb, Content: text})
	if err != nil {
		t.Fatal(err)
	}
	var reply string
	defer func() {
		if t.Failed() {
			page, _ := in.Chat.Timeline(ctx, services.DefaultTimeline, 0, 0, 50)
			for _, m := range page.Messages {
				t.Logf("timeline: %d %s %s %s %.200q", m.ID, m.Role, m.Source, m.Metadata, m.Content)
			}
		}
	}()
	waitFor(t, "the answer to "+text, func() bool {
		page, err := in.Chat.Timeline(ctx, services.DefaultTimeline, 0, 0, 200)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			if meta, _ := services.DecodeMeta(m.Metadata); m.Role == services.RoleAssistant && meta.ReplyTo == msg.ID {
				reply = m.Content
				return true
			}
		}
		return false
	})
	return reply
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !poll(60*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestMCPImagesReachAModelThatReadsThem: server-everything's
// get-tiny-image returns a PNG. With LLM_IMAGES on, the image reaches the
// model with the tool's result: inside the tool_result for Anthropic, in a
// user message right after the tool messages for OpenAI (whose tool
// messages carry text only, so the tool-call rules still hold). With it
// off, the model only reads the image's description.
func TestMCPImagesReachAModelThatReadsThem(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		provider string
		images   bool
	}{{"openai", true}, {"anthropic", true}, {"openai", false}} {
		// A subtest each: its instance (and its pool) stops before the next
		// starts, so the test holds one instance's connections, not three.
		t.Run(fmt.Sprintf("%s images=%v", c.provider, c.images), func(t *testing.T) {
			model := llmtest.NewServer(t)
			in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) {
				o.MCP = mcp.Config{"everything": mcptest.Everything(t)}
				o.Agent.PassImages = c.images
				if c.provider == "anthropic" {
					o.LLM.Provider, o.LLM.BaseURL, o.LLM.Model, o.LLM.APIKey = "anthropic", model.AnthropicBaseURL(), "claude-test", "sk-test"
				}
			}})
			waitFor(t, "the MCP server", func() bool {
				_, servers := in.App.Tools().ToolCatalog()
				return len(servers) == 1 && servers[0].State == "ready"
			})
			model.Enqueue(llmtest.Call("everything__get-tiny-image", `{}`), llmtest.Text("A tiny image."))
			ask(t, in, "show me the tiny image")
			waitFor(t, "the second model call", func() bool { return model.RequestCount() >= 2 })
			body := string(model.Requests()[1].Body)
			var req map[string]any
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			msgs, _ := req["messages"].([]any)
			last, _ := json.Marshal(msgs[len(msgs)-1])
			switch {
			case !c.images:
				if strings.Contains(body, "base64") || !strings.Contains(body, "[image 1, image/png") {
					t.Errorf("%s without images: the model got %s", c.provider, last)
				}
			case c.provider == "openai":
				if !strings.Contains(string(last), `"role":"user"`) || !strings.Contains(string(last), `data:image/png;base64,`) ||
					!strings.Contains(string(msgs[len(msgs)-2].(map[string]any)["role"].(string)), "tool") {
					t.Errorf("openai: the image is not in a user message after the tool message: %s", last)
				}
			case c.provider == "anthropic":
				if !strings.Contains(string(last), `"tool_result"`) || !strings.Contains(string(last), `"type":"image"`) || !strings.Contains(string(last), `"media_type":"image/png"`) {
					t.Errorf("anthropic: the image is not in the tool_result: %s", last)
				}
			}
		})
	}
}
