package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func tool(name, source, desc string) Tool {
	t := Func(name, services.EffectRead, desc, func(context.Context, Call, noArgs) (Result, error) { return Result{Content: "ok"}, nil })
	t.Source = source
	return t
}

func sampleTools() []Tool {
	return []Tool{
		tool("read_file", "", "Read a text file from your workspace."),
		tool("write_file", "", "Write a file in your workspace."),
		tool("schedule", "", "Schedule a task to run later on its own: reminders and monitors."),
		tool("list_schedules", "", "List the owner's schedules."),
		tool("fetch_url", "", "Fetch a web page and return it as Markdown."),
		tool("web_search", "", "Search the web."),
		tool("everything__echo", "everything", "Echoes back the input string"),
		tool("everything__get-sum", "everything", "Returns the sum of two numbers"),
	}
}

// charTokens counts a definition as one token per 4 bytes of its parts.
func charTokens(s services.ToolSpec) int {
	return (len(s.Name) + len(s.Description) + len(s.Parameters)) / 4
}

func names(specs []services.ToolSpec) string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return strings.Join(n, " ")
}

// TestSelectDefersOnlyOverTheThreshold: under the threshold (or with
// deferral off) every tool is sent in the order given, without
// find_tools; over it, the core set (names and a whole server) then
// find_tools, the rest in the box.
func TestSelectDefersOnlyOverTheThreshold(t *testing.T) {
	all := sampleTools()
	total := 0
	for _, tl := range all {
		total += charTokens(tl.Spec())
	}
	find := FindTools()
	for _, over := range []int{0, total} {
		specs, box := Select(all, Selection{Core: []string{"read_file"}, DeferOver: over, Tokens: charTokens}, find)
		if box != nil || len(specs) != len(all) || specs[0].Name != "read_file" || strings.Contains(names(specs), FindToolsName) {
			t.Fatalf("DeferOver %d (total %d): %s, box %v", over, total, names(specs), box != nil)
		}
	}
	specs, box := Select(append(all, find), Selection{Core: []string{"read_file", "everything__*"}, DeferOver: total - 1, Tokens: charTokens}, find)
	if got := names(specs); got != "read_file everything__echo everything__get-sum find_tools" {
		t.Fatalf("core: %s", got)
	}
	if !box.Deferred("schedule") || box.Deferred("read_file") || box.Deferred("everything__echo") || box.Loaded("schedule") {
		t.Fatal("deferred set wrong")
	}
	if got := box.Load("web_search", "read_file", "web_search", "nope"); strings.Join(got, " ") != "web_search" {
		t.Fatalf("Load: %v", got)
	}
	box.Load("schedule")
	if got := names(box.Specs()); got != "web_search schedule" {
		t.Fatalf("loaded in load order: %s", got)
	}
}

// TestSearchRanksNamesAndDescriptions: a query finds tools by their name,
// group and description, best first; exact names come first; a query that
// matches nothing returns nothing.
func TestSearchRanksNamesAndDescriptions(t *testing.T) {
	_, box := Select(sampleTools(), Selection{Core: []string{"read_file", "write_file"}, DeferOver: 1, Tokens: charTokens}, FindTools())
	cases := []struct{ query, first string }{
		{"remind me tomorrow: schedule a reminder", "schedule"},
		{"scheduled tasks", "schedule"},
		{"fetch a web page", "fetch_url"},
		{"search the web", "web_search"},
		{"echo a message back", "everything__echo"},
		{"sum of two numbers", "everything__get-sum"},
	}
	for _, c := range cases {
		got := box.Search(c.query, nil, 5)
		if len(got) == 0 || got[0].Name != c.first {
			t.Errorf("%q: %+v, want %s first", c.query, got, c.first)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Score > got[i-1].Score {
				t.Errorf("%q: not ranked: %+v", c.query, got)
			}
		}
	}
	if got := box.Search("quantum chromodynamics", nil, 5); len(got) != 0 {
		t.Errorf("unrelated query found %+v", got)
	}
	got := box.Search("web", []string{"everything__echo", "read_file"}, 2)
	if len(got) != 2 || got[0].Name != "everything__echo" || got[0].Group != "everything" {
		t.Errorf("exact names first, core ones skipped, limit kept: %+v", got)
	}
}

// TestGroupsListIsStable: one line per group, sorted, the same whatever
// the order of the tools; empty when nothing is deferred.
func TestGroupsListIsStable(t *testing.T) {
	all := sampleTools()
	sel := Selection{Core: []string{"read_file"}, DeferOver: 1, Tokens: charTokens}
	_, a := Select(all, sel, FindTools())
	rev := append([]Tool(nil), all...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	_, b := Select(rev, sel, FindTools())
	if a.Groups() != b.Groups() {
		t.Fatalf("order changed the list:\n%s\n%s", a.Groups(), b.Groups())
	}
	want := []string{
		"- everything: tools of the MCP server everything (everything__echo, everything__get-sum)",
		"- schedules: create, list, change, pause and cancel reminders and monitors (list_schedules, schedule)",
		"- web: fetch a web page, search the web (fetch_url, web_search)",
		"- workspace: the workspace's files: read, write, edit, list, search, Markdown blocks (write_file)",
	}
	lines := strings.Split(a.Groups(), "\n")
	if got := strings.Join(lines[len(lines)-4:], "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("groups:\n%s", got)
	}
	var none *Toolbox
	if none.Groups() != "" || none.Deferred("x") || none.Specs() != nil {
		t.Fatal("a nil box defers nothing")
	}
}

// TestFindToolsLoadsWhatItReturns: find_tools through the registry (its
// arguments validated) returns the matches and loads them in the run's box;
// bad arguments are refused; without a box it says every tool is loaded.
func TestFindToolsLoadsWhatItReturns(t *testing.T) {
	reg := NewRegistry(nil)
	if err := reg.Register(FindTools()); err != nil {
		t.Fatal(err)
	}
	_, box := Select(sampleTools(), Selection{Core: []string{"read_file"}, DeferOver: 1, Tokens: charTokens}, FindTools())
	ctx := WithToolbox(context.Background(), box)
	res := reg.Execute(ctx, FindToolsName, Call{Arguments: json.RawMessage(`{"query":"reminders","names":["fetch_url","bogus"],"limit":2}`)})
	var out struct {
		Tools       []Match  `json:"tools"`
		NotDeferred []string `json:"not_deferred"`
	}
	if res.IsError || json.Unmarshal([]byte(res.Content), &out) != nil {
		t.Fatalf("find_tools: %s", res.Content)
	}
	if len(out.Tools) != 2 || out.Tools[0].Name != "fetch_url" || out.Tools[1].Name != "schedule" || strings.Join(out.NotDeferred, ",") != "bogus" {
		t.Fatalf("find_tools: %s", res.Content)
	}
	if got := names(box.Specs()); got != "fetch_url schedule" {
		t.Fatalf("loaded: %s", got)
	}
	for _, bad := range []string{`{}`, `{"query":"x","limit":50}`, `{"query":3}`} {
		if r := reg.Execute(ctx, FindToolsName, Call{Arguments: json.RawMessage(bad)}); !r.IsError || r.ErrorCode != CodeBadArguments {
			t.Errorf("%s: %+v", bad, r)
		}
	}
	if r := reg.Execute(context.Background(), FindToolsName, Call{Arguments: json.RawMessage(`{"query":"x"}`)}); r.IsError || !strings.Contains(r.Content, "loaded already") {
		t.Errorf("without a box: %+v", r)
	}
}
