package tools

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/switchboard/switchboard/services"
)

// FindToolsName is the core tool that searches the deferred tools and
// loads the ones it returns.
const FindToolsName = "find_tools"

// DefaultCore is the core set when TOOLS_CORE is not set: what most turns
// need — the workspace's files (read, write, edit, list, search), the
// conversation's archive (recall_search) and what the owner asks to keep
// (remember), and delegate. find_tools joins it whenever anything is
// deferred.
var DefaultCore = []string{"read_file", "write_file", "edit_file", "list_files", "search", "recall_search", "remember", "delegate"}

// CoordinatorCore is the main agent's core set when TOOLS_CORE is not set
// and delegated tasks run as sub-agents: there main coordinates (it hands
// the work to sub-agents, which keep DefaultCore, and answers from their
// handoffs and the archive), so it carries delegate and recall_search on
// every call and finds the rest (a file it writes itself, a schedule)
// with find_tools, or by calling a listed tool's exact name, for one
// more model step when it needs one.
var CoordinatorCore = []string{"delegate", "recall_search"}

// builtinGroup names the group of a deferred built-in tool; a built-in
// not listed here is in "other". groupSummary is each group's line in the
// system prompt.
var builtinGroup = map[string]string{
	"schedule": "schedules", "update_schedule": "schedules", "cancel_schedule": "schedules", "list_schedules": "schedules",
	"fetch_url": "web", "web_search": "web",
	"send_file":       "media",
	"recall_timeline": "context", "recall_detail": "context", "propose_rule": "context",
	"read_block": "workspace", "replace_block": "workspace",
	"read_file": "workspace", "write_file": "workspace", "edit_file": "workspace", "list_files": "workspace", "search": "workspace",
	"recall_search": "context", "remember": "context", "todo": "context", "delegate": "agents",
	"exec": "code",
}

var groupSummary = map[string]string{
	"schedules": "create, list, change, pause and cancel reminders and monitors",
	"web":       "fetch a web page, search the web",
	"media":     "send a workspace file (a picture, a document) to the owner",
	"context":   "the conversation's archive around a hit and in full, remembered settings, standing rules, your task list",
	"workspace": "the workspace's files: read, write, edit, list, search, Markdown blocks",
	"agents":    "delegate a task to a sub-agent",
	"code":      "run a command or script in a sandbox over the workspace (python3, sqlite3, jq, coreutils)",
	"other":     "more built-in tools",
}

// MatchesCore reports whether a core list names tool: by its name, or a
// whole MCP server as "<server>__*".
func MatchesCore(list []string, tool string) bool {
	for _, p := range list {
		if p == tool || strings.HasSuffix(p, "__*") && strings.HasPrefix(tool, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// Group is the group a deferred tool is listed under: its MCP server, or a
// built-in group (schedules, web, media, context, workspace, other).
func (t Tool) Group() string {
	if t.Source != "" {
		return t.Source
	}
	if g, ok := builtinGroup[t.Name]; ok {
		return g
	}
	return "other"
}

// Selection says which tools of a run are always loaded.
type Selection struct {
	// Core names the tools always loaded (names or "<server>__*").
	Core []string
	// DeferOver, in tokens: when every tool a run may use fits under it,
	// nothing is deferred. 0 never defers.
	DeferOver int
	// Tokens counts one tool's definition as the prompt counts it.
	Tokens func(services.ToolSpec) int
}

// Select splits the tools a run may use (find_tools excluded: it is added
// here when needed) into the definitions sent with every request, in the
// order given, and the Toolbox of the deferred ones. The Toolbox is nil
// when nothing is deferred: the request is then exactly the tools given.
func Select(all []Tool, sel Selection, findTools Tool) ([]services.ToolSpec, *Toolbox) {
	var cands []Tool
	total := 0
	for _, t := range all {
		if t.Name == FindToolsName {
			continue
		}
		cands = append(cands, t)
		if sel.Tokens != nil {
			total += sel.Tokens(t.Spec())
		}
	}
	specs := make([]services.ToolSpec, 0, len(cands)+1)
	if sel.DeferOver <= 0 || sel.Tokens == nil || total <= sel.DeferOver {
		for _, t := range cands {
			specs = append(specs, t.Spec())
		}
		return specs, nil
	}
	box := &Toolbox{deferred: map[string]Tool{}, loaded: map[string]bool{}}
	for _, t := range cands {
		if MatchesCore(sel.Core, t.Name) {
			specs = append(specs, t.Spec())
			continue
		}
		box.order = append(box.order, t)
		box.deferred[t.Name] = t
	}
	if len(box.order) == 0 {
		return specs, nil
	}
	return append(specs, findTools.Spec()), box
}

// Toolbox is one run's deferred tools and those it has loaded. It is safe
// for concurrent use (a main run's calls run side by side).
type Toolbox struct {
	order    []Tool
	deferred map[string]Tool

	mu      sync.Mutex
	loaded  map[string]bool
	loadSeq []services.ToolSpec
}

// Deferred reports whether name is one of the box's deferred tools.
func (b *Toolbox) Deferred(name string) bool {
	if b == nil {
		return false
	}
	_, ok := b.deferred[name]
	return ok
}

// Loaded reports whether name was loaded in this run.
func (b *Toolbox) Loaded(name string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loaded[name]
}

// Load makes deferred tools callable from the run's next model call; it
// returns the names it loaded now (not loaded before).
func (b *Toolbox) Load(names ...string) []string {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, n := range names {
		t, ok := b.deferred[n]
		if !ok || b.loaded[n] {
			continue
		}
		b.loaded[n] = true
		b.loadSeq = append(b.loadSeq, t.Spec())
		out = append(out, n)
	}
	return out
}

// Specs returns the definitions loaded so far, in load order.
func (b *Toolbox) Specs() []services.ToolSpec {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]services.ToolSpec(nil), b.loadSeq...)
}

// Groups is the system prompt's list of the deferred tools, one line per
// group, sorted by group: it changes only when the tools or the
// configuration change.
func (b *Toolbox) Groups() string {
	if b == nil || len(b.order) == 0 {
		return ""
	}
	groups := map[string][]string{}
	builtin := map[string]bool{}
	for _, t := range b.order {
		g := t.Group()
		groups[g] = append(groups[g], t.Name)
		builtin[g] = t.Source == ""
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	var s strings.Builder
	s.WriteString("## More tools\n\nThese tools are not loaded yet. Call " + FindToolsName +
		" with what you need (words, or exact names) to load them; a tool it returns can be called from your next step.\n")
	for _, g := range names {
		list := groups[g]
		sort.Strings(list)
		what := groupSummary[g]
		if !builtin[g] {
			what = "tools of the MCP server " + g
		}
		fmt.Fprintf(&s, "\n- %s: %s (%s)", g, what, strings.Join(list, ", "))
	}
	return s.String()
}

// Match is one deferred tool find_tools returns.
type Match struct {
	Name        string  `json:"name"`
	Group       string  `json:"group"`
	Description string  `json:"description"`
	Score       float64 `json:"score"`
}

// Search ranks the deferred tools against query (full-text over names and
// descriptions: each query word found in a tool's name counts 3, in its
// group 2, in its description 1, a word that starts a name part 1 more) and
// returns at most limit with a positive score, best first; names asked
// exactly come first, whatever the query.
func (b *Toolbox) Search(query string, names []string, limit int) []Match {
	if b == nil {
		return nil
	}
	var out []Match
	seen := map[string]bool{}
	for _, n := range names {
		if t, ok := b.deferred[n]; ok && !seen[n] {
			seen[n] = true
			out = append(out, Match{Name: n, Group: t.Group(), Description: firstSentence(t.Description), Score: 100})
		}
	}
	words := searchWords(query)
	if len(words) == 0 {
		return out
	}
	var ranked []Match
	for _, t := range b.order {
		if seen[t.Name] {
			continue
		}
		if sc := score(t, words); sc > 0 {
			ranked = append(ranked, Match{Name: t.Name, Group: t.Group(), Description: firstSentence(t.Description), Score: sc})
		}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].Score > ranked[j].Score })
	out = append(out, ranked...)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func score(t Tool, words []string) float64 {
	nameParts := searchWords(t.Name)
	name := strings.Join(nameParts, " ")
	group := strings.ToLower(t.Group())
	desc := " " + strings.Join(searchWords(t.Description), " ") + " "
	sc := 0.0
	for _, w := range words {
		stem := stemOf(w)
		if strings.Contains(name, stem) {
			sc += 3
			for _, p := range nameParts {
				if strings.HasPrefix(p, stem) {
					sc++
					break
				}
			}
		}
		if strings.Contains(group, stem) {
			sc += 2
		}
		if strings.Contains(desc, " "+stem) {
			sc++
		}
	}
	return sc
}

// stemOf cuts a plural's or a verb form's ending so "schedules",
// "scheduling" and "scheduled" all find "schedule".
func stemOf(w string) string {
	for _, suf := range []string{"ing", "ies", "es", "ed", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return strings.TrimSuffix(w, suf)
		}
	}
	return w
}

var stopWords = map[string]bool{"a": true, "an": true, "the": true, "to": true, "of": true, "and": true, "or": true, "for": true, "in": true, "on": true, "with": true, "tool": true, "tools": true, "i": true, "me": true, "my": true, "is": true, "it": true}

// searchWords lowercases s and splits it at every character that is not a
// letter or a digit, dropping stop words.
func searchWords(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	})
	out := f[:0]
	for _, w := range f {
		if !stopWords[w] {
			out = append(out, w)
		}
	}
	return out
}

// firstSentence is a description's first sentence (at most 200 characters).
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}

type toolboxKey struct{}

// WithToolbox gives the tools called under ctx the run's Toolbox (nil:
// nothing is deferred in this run).
func WithToolbox(ctx context.Context, b *Toolbox) context.Context {
	return context.WithValue(ctx, toolboxKey{}, b)
}

// ToolboxFrom is the run's Toolbox, nil when nothing is deferred.
func ToolboxFrom(ctx context.Context) *Toolbox {
	b, _ := ctx.Value(toolboxKey{}).(*Toolbox)
	return b
}

type findToolsArgs struct {
	Query string   `json:"query,omitempty" jsonschema:"Words for what you need (e.g. 'remind me tomorrow', 'fetch a web page')."`
	Names []string `json:"names,omitempty" jsonschema:"Exact tool names to load."`
	Limit int      `json:"limit,omitempty" jsonschema:"At most this many tools (1-20, default 5)."`
}

// FindTools is the core tool that searches the run's deferred tools and
// loads those it returns: their definitions go with the run's next model
// call.
func FindTools() Tool {
	return Func(FindToolsName, services.EffectRead,
		"Find and load tools that are not loaded yet (the system prompt lists their groups). Give words for what you need and/or exact names; the tools returned can be called from your next step.",
		func(ctx context.Context, _ Call, a findToolsArgs) (Result, error) {
			if strings.TrimSpace(a.Query) == "" && len(a.Names) == 0 {
				return Result{}, services.CodedErrorf(services.EINVALID, CodeBadArguments, "give a query, names, or both")
			}
			if a.Limit == 0 {
				a.Limit = 5
			}
			if a.Limit < 1 || a.Limit > 20 {
				return Result{}, services.CodedErrorf(services.EINVALID, CodeBadArguments, "argument \"limit\": %d is outside 1-20", a.Limit)
			}
			box := ToolboxFrom(ctx)
			if box == nil {
				return JSONResult(map[string]any{"tools": []Match{}, "note": "every tool is loaded already; call the one you need"})
			}
			found := box.Search(a.Query, a.Names, a.Limit)
			names := make([]string, len(found))
			for i, m := range found {
				names[i] = m.Name
			}
			box.Load(names...)
			res := map[string]any{"tools": found}
			var unknown []string
			for _, n := range a.Names {
				if !box.Deferred(n) {
					unknown = append(unknown, n)
				}
			}
			if len(unknown) > 0 {
				res["not_deferred"] = unknown
			}
			if len(found) == 0 {
				res["note"] = "no deferred tool matches; try other words"
			} else {
				res["note"] = "these tools are loaded: call them from your next step"
			}
			return JSONResult(res)
		})
}

// LoadedOnCall is the result of a call to a deferred tool the model named
// without loading it first: the call loaded it, and the model calls it
// again.
func LoadedOnCall(name string) Result {
	r, _ := JSONResult(map[string]string{"status": "loaded", "tool": name,
		"note": fmt.Sprintf("%s was not loaded, so this call did not run. It is loaded now: call it again with the same arguments.", name)})
	return r
}
