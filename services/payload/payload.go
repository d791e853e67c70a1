// Package payload builds the context payload of spec 000
// (context_payload.v2): a versioned, budgeted JSON object with the task,
// observations in the obs.v1 shape (progressive disclosure: index →
// timeline → detail) and a workspace map, for sub-agents and scripts
// (`switchboard context`). docs/CONTEXT.md, "The context payload".
package payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/markdown"
)

// Version is the payload's contract version; ObsVersion and MapVersion
// those of its observations and workspace map items.
const (
	Version    = "context_payload.v2"
	ObsVersion = "obs.v1"
	MapVersion = "repomap.v1"
)

// Modes of a payload.
const (
	ModeIndex    = services.PayloadIndex
	ModeTimeline = services.PayloadTimeline
	ModeDetail   = services.PayloadDetail
	ModeMap      = services.PayloadMap
)

// Modes lists them.
var Modes = []string{ModeIndex, ModeTimeline, ModeDetail, ModeMap}

// Payload is a context_payload.v2 object. Every field is always present.
type Payload struct {
	Version      string       `json:"version"`
	GeneratedAt  string       `json:"generated_at"`
	SubagentType string       `json:"subagent_type"`
	Mode         string       `json:"mode"`
	Budget       Budget       `json:"budget"`
	Task         Task         `json:"task"`
	Observations Observations `json:"observations"`
	RepoMap      RepoMap      `json:"repo_map"`
	Notes        []string     `json:"notes"`
}

// Budget is what the payload may take and took (tokens ≈ characters / 4
// of the whole object, as spec 000's budgeter counts), whether items were
// left out, and the downgrades applied ("detail→timeline").
type Budget struct {
	BudgetTokens     int      `json:"budget_tokens"`
	TokensApprox     int      `json:"tokens_approx"`
	Truncated        bool     `json:"truncated"`
	DowngradeApplied []string `json:"downgrade_applied"`
}

// Task names the task the payload is for: a run (task_id "r<run id>") and
// its task text, cut to the profile's task_json cap.
type Task struct {
	TaskID   string `json:"task_id,omitempty"`
	TaskJSON string `json:"task_json,omitempty"`
}

// Observations are the recalled rows and summaries (source: "postgres",
// the recall index and the timeline's rows).
type Observations struct {
	Source string        `json:"source"`
	Items  []Observation `json:"items"`
}

// Observation is an obs.v1 item: ID is the row's (or summary's) id, Ref
// the recall id ("m12", "s3") that --ids and recall_detail take.
type Observation struct {
	SchemaVersion string `json:"schema_version"`
	ID            int64  `json:"id"`
	Ref           string `json:"ref"`
	TS            string `json:"ts"`
	TaskID        string `json:"task_id"`
	Actor         string `json:"actor"`
	Phase         string `json:"phase"`
	Summary       string `json:"summary"`
	Detail        string `json:"detail,omitempty"`
}

// RepoMap is the workspace map (source "workspace"): files, Markdown
// headings and code files' top-level symbols.
type RepoMap struct {
	Source string    `json:"source"`
	Items  []MapItem `json:"items"`
}

// MapItem is one file of the workspace map (repomap.v1).
type MapItem struct {
	SchemaVersion string   `json:"schema_version"`
	Path          string   `json:"path"`
	Hash          string   `json:"hash"`
	Symbols       []Symbol `json:"symbols"`
}

// Symbol is a heading (kind "heading", Name its path) or a top-level code
// symbol (function, method, class, const, var, other).
type Symbol struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Signature string `json:"signature,omitempty"`
	LineStart int    `json:"line_start,omitempty"`
	LineEnd   int    `json:"line_end,omitempty"`
}

// Profile is a budget profile of spec 000: tokens per mode, per-source
// caps, top_k per mode and the order detail downgrades in
// (services.PayloadProfile, which AGENT_PROFILES' "context" holds).
type Profile = services.PayloadProfile

// DefaultProfile is the profile of every sub-agent type that names none.
func DefaultProfile() Profile { return services.DefaultPayloadProfile() }

// Runs reads a run (the task of --task-id).
type Runs interface {
	GetRun(ctx context.Context, id int64) (services.Run, error)
}

// Rows reads a context scope's rows (the timeline of a task).
type Rows interface {
	ListContext(ctx context.Context, q services.ContextQuery) ([]services.Message, error)
}

// Files are a timeline's workspace files, for the map.
type Files interface {
	WalkFiles(timelineScope string, fn func(path string, size int64) error) error
	ReadFile(timelineScope, path string) ([]byte, error)
}

// Options configure a Builder.
type Options struct {
	Recall services.RecallStore
	Rows   Rows
	Runs   Runs
	Files  Files
	// Profiles are the budget profiles by sub-agent type (AGENT_PROFILES'
	// names); every type not in it, and "" ("main"), gets DefaultProfile.
	Profiles map[string]Profile
	// Known reports whether a sub-agent type exists (nil: any).
	Known func(name string) bool
	Now   func() time.Time
}

// Builder builds payloads.
type Builder struct{ opts Options }

// New returns a Builder.
func New(o Options) *Builder {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Builder{opts: o}
}

// Params select a payload.
type Params struct {
	Timeline string
	Mode     string
	// TaskID is a run ("r12" or "12"): its task text, and the timeline
	// mode's rows are its scope's.
	TaskID string
	// IDs are recall ids (m12, s3) for detail.
	IDs   []string
	Query string
	// Profile is the sub-agent type ("" : main).
	Profile string
}

// Approx is spec 000's token estimate: ceil(characters / 4).
func Approx(s string) int { return (len([]rune(s)) + 3) / 4 }

// Build assembles the payload within the mode's budget. Detail over its
// budget degrades to timeline (details dropped), then to index (fewer
// items), each step in downgrade_applied; items left out after that set
// truncated. Errors: EINVALID for a bad mode, profile, task id or id.
func (b *Builder) Build(ctx context.Context, p Params) (Payload, error) {
	if !slices.Contains(Modes, p.Mode) {
		return Payload{}, services.Errorf(services.EINVALID, "mode %q: want one of %s", p.Mode, strings.Join(Modes, ", "))
	}
	prof := DefaultProfile()
	typ := "main"
	if p.Profile != "" {
		if b.opts.Known != nil && !b.opts.Known(p.Profile) {
			return Payload{}, services.Errorf(services.EINVALID, "profile %q: no such sub-agent profile (AGENT_PROFILES)", p.Profile)
		}
		typ = p.Profile
		if pr, ok := b.opts.Profiles[p.Profile]; ok {
			prof = pr
		}
	}
	out := Payload{Version: Version, GeneratedAt: b.opts.Now().UTC().Format("2006-01-02 15:04:05"), SubagentType: typ, Mode: p.Mode,
		Observations: Observations{Source: "postgres", Items: []Observation{}}, RepoMap: RepoMap{Source: "workspace", Items: []MapItem{}},
		Notes: []string{}, Budget: Budget{DowngradeApplied: []string{}}}
	view := services.NewRecallView(p.Timeline, services.MainScope, services.MainScope)
	var scope string
	if p.TaskID != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(p.TaskID), "r"), 10, 64)
		if err != nil || id <= 0 {
			return Payload{}, services.Errorf(services.EINVALID, "task id %q: want a run id (r12 or 12)", p.TaskID)
		}
		run, err := b.opts.Runs.GetRun(ctx, id)
		if err != nil || run.TimelineScope != p.Timeline {
			return Payload{}, services.Errorf(services.ENOTFOUND, "task id %q: no such run in this conversation", p.TaskID)
		}
		out.Task.TaskID, scope = "r"+strconv.FormatInt(id, 10), run.ContextScope
		if task := b.taskText(ctx, p.Timeline, run); task != "" {
			out.Task.TaskJSON = cutTokens(task, prof.MaxPerSource.TaskJSON)
		}
	}
	var err error
	switch p.Mode {
	case ModeIndex:
		out.Budget.BudgetTokens = prof.Budgets.Index
		out.Observations.Items, err = b.index(ctx, view, p, prof.TopK.Index)
		out.Notes = append(out.Notes, "index only: summaries of at most 120 characters; for whole texts ask --mode detail --ids m12,s3")
	case ModeTimeline:
		out.Budget.BudgetTokens = prof.Budgets.Timeline
		out.Observations.Items, err = b.timeline(ctx, p.Timeline, scope, prof.TopK.Timeline)
		out.Notes = append(out.Notes, "timeline: the newest rows, oldest first; for whole texts ask --mode detail --ids")
	case ModeDetail:
		out.Budget.BudgetTokens = prof.Budgets.Detail
		if len(p.IDs) == 0 {
			return Payload{}, services.Errorf(services.EINVALID, "mode detail needs --ids (recall ids: m12,s3)")
		}
		out.Observations.Items, err = b.detail(ctx, view, p.IDs, prof)
	case ModeMap:
		out.Budget.BudgetTokens = prof.Budgets.Map
		out.RepoMap.Items = b.workspaceMap(p.Timeline, &out)
	}
	if err != nil {
		return Payload{}, err
	}
	for i := range out.Observations.Items {
		out.Observations.Items[i].TaskID = out.Task.TaskID
	}
	fit(&out, prof)
	return out, nil
}

// size is the payload's tokens_approx.
func size(p *Payload) int {
	data, _ := json.Marshal(p)
	n := Approx(string(data))
	// The number itself can grow the object by a few characters.
	return n + 2
}

// fit brings the payload within its budget: detail downgrades first,
// down the profile's downgrade order (to timeline: its texts dropped; to
// index: also the items beyond the index's top_k), each step recorded,
// then the last items go (truncated).
func fit(p *Payload, prof Profile) {
	over := func() bool { p.Budget.TokensApprox = size(p); return p.Budget.TokensApprox > p.Budget.BudgetTokens }
	from := p.Mode
	for _, to := range prof.Downgrades(p.Mode) {
		if !over() {
			break
		}
		// Down to timeline or index, the details go; down to index, the
		// items beyond its top_k too.
		// A step that changes nothing is not taken.
		changed := false
		for i := range p.Observations.Items {
			changed = changed || p.Observations.Items[i].Detail != ""
			p.Observations.Items[i].Detail = ""
		}
		if to == ModeIndex && len(p.Observations.Items) > prof.TopK.Index {
			p.Observations.Items, changed = p.Observations.Items[:prof.TopK.Index], true
		}
		if changed {
			p.Budget.DowngradeApplied = append(p.Budget.DowngradeApplied, from+"→"+to)
			from = to
		}
	}
	for over() {
		switch {
		case len(p.RepoMap.Items) > 0:
			p.RepoMap.Items = p.RepoMap.Items[:len(p.RepoMap.Items)-1]
		case len(p.Observations.Items) > 0:
			p.Observations.Items = p.Observations.Items[:len(p.Observations.Items)-1]
		case p.Task.TaskJSON != "":
			p.Task.TaskJSON = ""
		default:
			p.Budget.Truncated = true
			return // the empty object alone (a budget under ~100 tokens)
		}
		p.Budget.Truncated = true
	}
}

func cutTokens(s string, tokens int) string {
	r := []rune(s)
	if tokens <= 0 || len(r) <= tokens*4 {
		return s
	}
	return string(r[:max(tokens*4-1, 0)]) + "…"
}

func summary(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= 120 {
		return s
	}
	return string(r[:119]) + "…"
}

func actor(m services.Message) string {
	switch {
	case m.Role == services.RoleUser && m.Source != services.SourceAgent:
		return "owner"
	case m.ContextScope == services.MainScope || m.ContextScope == "" || m.ContextScope == services.GlobalSummaryScope:
		return "main"
	}
	return m.ContextScope
}

func phase(m services.Message) string {
	if m.Role == services.RoleTool {
		return "tool"
	}
	return "other"
}

func obsOf(m services.Message, withDetail bool) Observation {
	o := Observation{SchemaVersion: ObsVersion, ID: m.ID, Ref: services.RecallRef(services.RecallMessage, m.ID),
		TS: m.CreatedAt.UTC().Format("2006-01-02 15:04:05"), Actor: actor(m), Phase: phase(m), Summary: summary(m.Content)}
	if withDetail {
		o.Detail = m.Content
	}
	return o
}

// taskText is the run's task: the first row of its scope (a child's task
// payload, a main run's trigger).
func (b *Builder) taskText(ctx context.Context, timeline string, run services.Run) string {
	rows, err := b.opts.Rows.ListContext(ctx, services.ContextQuery{TimelineScope: timeline, ContextScope: run.ContextScope, Limit: 1})
	if err == nil && len(rows) > 0 && run.ContextScope != services.MainScope {
		return rows[0].Content
	}
	if run.TriggerMessageID != 0 {
		if ms, err := b.opts.Recall.RecallMessages(ctx, services.NewRecallView(timeline, services.MainScope, services.MainScope), []int64{run.TriggerMessageID}); err == nil && len(ms) == 1 {
			return ms[0].Content
		}
	}
	return ""
}

// index: the rows and summaries most relevant to the query (full text,
// any word), or without one the newest visible rows; summaries only.
func (b *Builder) index(ctx context.Context, view services.RecallView, p Params, k int) ([]Observation, error) {
	terms := services.RecallTerms(p.Query)
	if len(terms) == 0 {
		return b.timeline(ctx, p.Timeline, "", k)
	}
	hits, err := b.opts.Recall.SearchRecall(ctx, services.RecallQuery{View: view, Terms: terms, AnyTerm: true, Limit: min(max(k, 1), 100)})
	if err != nil {
		return nil, err
	}
	out := []Observation{}
	for _, h := range hits {
		o := Observation{SchemaVersion: ObsVersion, ID: h.ID, Ref: h.Ref(), TS: h.CreatedAt.UTC().Format("2006-01-02 15:04:05"),
			Actor: "main", Phase: "other", Summary: summary(h.Snippet)}
		if h.Kind == services.RecallSummary {
			o.Phase = "summary"
		} else if h.Role == services.RoleUser {
			o.Actor = "owner"
		} else if h.AgentID != "" {
			o.Actor = h.AgentID
		}
		out = append(out, o)
	}
	return out, nil
}

// timeline: the newest k rows of a scope (a task's run), or of the
// timeline's visible rows, oldest first; summaries only.
func (b *Builder) timeline(ctx context.Context, timeline, scope string, k int) ([]Observation, error) {
	q := services.ContextQuery{TimelineScope: timeline, ByTimelineOnly: true, BeforeID: 1<<63 - 1, Limit: max(k, 1)}
	if scope != "" {
		q = services.ContextQuery{TimelineScope: timeline, ContextScope: scope, BeforeID: 1<<63 - 1, Limit: max(k, 1)}
	}
	rows, err := b.opts.Rows.ListContext(ctx, q)
	if err != nil {
		return nil, err
	}
	out := []Observation{}
	for _, m := range rows {
		if m.TimelineScope != timeline || m.Source == services.SourceSystem {
			continue
		}
		out = append(out, obsOf(m, false))
	}
	return out, nil
}

// detail: the rows and summaries named, whole (each cut to the
// observations' cap), in the order given.
func (b *Builder) detail(ctx context.Context, view services.RecallView, ids []string, prof Profile) ([]Observation, error) {
	if len(ids) > prof.TopK.Detail {
		return nil, services.Errorf(services.EINVALID, "%d ids: mode detail takes at most %d", len(ids), prof.TopK.Detail)
	}
	var msgIDs, segIDs []int64
	for _, ref := range ids {
		kind, id, err := services.ParseRecallRef(ref)
		if err != nil {
			return nil, err
		}
		if kind == services.RecallSummary {
			segIDs = append(segIDs, id)
		} else {
			msgIDs = append(msgIDs, id)
		}
	}
	byRef := map[string]Observation{}
	if len(msgIDs) > 0 {
		rows, err := b.opts.Recall.RecallMessages(ctx, view, msgIDs)
		if err != nil {
			return nil, err
		}
		for _, m := range rows {
			o := obsOf(m, true)
			o.Detail = cutTokens(o.Detail, prof.MaxPerSource.Observations)
			byRef[o.Ref] = o
		}
	}
	if len(segIDs) > 0 {
		segs, err := b.opts.Recall.RecallSegments(ctx, view, segIDs)
		if err != nil {
			return nil, err
		}
		for _, s := range segs {
			ref := services.RecallRef(services.RecallSummary, s.ID)
			byRef[ref] = Observation{SchemaVersion: ObsVersion, ID: s.ID, Ref: ref, TS: s.CreatedAt.UTC().Format("2006-01-02 15:04:05"),
				Actor: "system", Phase: "summary", Summary: summary(s.SummaryText), Detail: cutTokens(s.SummaryText, prof.MaxPerSource.Observations)}
		}
	}
	out := []Observation{}
	for _, ref := range ids {
		kind, id, _ := services.ParseRecallRef(ref)
		o, ok := byRef[services.RecallRef(kind, id)]
		if !ok {
			return nil, services.Errorf(services.ENOTFOUND, "id %s: no such message or summary in this conversation", ref)
		}
		out = append(out, o)
	}
	return out, nil
}

// maxMapFiles and maxMapFileBytes bound the workspace map's walk.
const (
	maxMapFiles     = 2000
	maxMapFileBytes = 256 << 10
)

var symbolRes = map[string][]struct {
	kind string
	re   *regexp.Regexp
}{
	".go": {
		{"method", regexp.MustCompile(`^func \([^)]*\) ([A-Za-z_]\w*)`)},
		{"function", regexp.MustCompile(`^func ([A-Za-z_]\w*)`)},
		{"class", regexp.MustCompile(`^type ([A-Za-z_]\w*)`)},
		{"const", regexp.MustCompile(`^const ([A-Za-z_]\w*)`)},
		{"var", regexp.MustCompile(`^var ([A-Za-z_]\w*)`)},
	},
	".py": {
		{"function", regexp.MustCompile(`^(?:async )?def ([A-Za-z_]\w*)`)},
		{"class", regexp.MustCompile(`^class ([A-Za-z_]\w*)`)},
	},
	".js": {
		{"function", regexp.MustCompile(`^(?:export )?(?:default )?(?:async )?function\*? ?([A-Za-z_$][\w$]*)`)},
		{"class", regexp.MustCompile(`^(?:export )?(?:default )?class ([A-Za-z_$][\w$]*)`)},
		{"const", regexp.MustCompile(`^(?:export )?const ([A-Za-z_$][\w$]*)`)},
	},
}

func init() {
	symbolRes[".ts"], symbolRes[".mjs"], symbolRes[".tsx"] = symbolRes[".js"], symbolRes[".js"], symbolRes[".js"]
}

// workspaceMap lists the workspace's files with their headings or
// top-level symbols (the budget leaves out the last files; fit).
func (b *Builder) workspaceMap(timeline string, p *Payload) []MapItem {
	out := []MapItem{}
	if b.opts.Files == nil {
		p.Notes = append(p.Notes, "no workspace on this server")
		return out
	}
	n := 0
	err := b.opts.Files.WalkFiles(timeline, func(rel string, size int64) error {
		if n++; n > maxMapFiles {
			p.Notes = append(p.Notes, fmt.Sprintf("the workspace has more than %d files: the rest are left out", maxMapFiles))
			return fs.SkipAll
		}
		item := MapItem{SchemaVersion: MapVersion, Path: rel, Symbols: []Symbol{}}
		ext := strings.ToLower(path.Ext(rel))
		if size > maxMapFileBytes || (ext != ".md" && ext != ".markdown" && symbolRes[ext] == nil) {
			out = append(out, item)
			return nil
		}
		data, err := b.opts.Files.ReadFile(timeline, rel)
		if err != nil {
			out = append(out, item)
			return nil
		}
		sum := sha256.Sum256(data)
		item.Hash = hex.EncodeToString(sum[:6])
		if ext == ".md" || ext == ".markdown" {
			for _, bl := range markdown.ParseBlocks(string(data)) {
				if bl.Kind == markdown.BlockHeading {
					item.Symbols = append(item.Symbols, Symbol{Kind: "heading", Name: bl.Path, LineStart: bl.StartLine, LineEnd: bl.EndLine})
				}
			}
		} else {
			for i, line := range strings.Split(string(data), "\n") {
				for _, s := range symbolRes[ext] {
					if m := s.re.FindStringSubmatch(line); m != nil {
						item.Symbols = append(item.Symbols, Symbol{Kind: s.kind, Name: m[1], Signature: summary(strings.TrimRight(line, " {\r")), LineStart: i + 1})
						break
					}
				}
			}
		}
		out = append(out, item)
		return nil
	})
	if err != nil {
		p.Notes = append(p.Notes, "the workspace could not be read: "+services.ErrorMessage(err))
	}
	return out
}
