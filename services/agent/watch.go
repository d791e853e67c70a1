package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// Bounds of what a watch fire's input carries of the content.
const (
	watchPromptChars = 6000
	watchDiffChars   = 4000
	// watchDiffCells bounds the line diff's table (lines × lines); past
	// it the changed middle is shown as all removed, then all added.
	watchDiffCells = 250_000
)

// readWatch reads a watch schedule's content without the model: its page,
// or the result of its read-only MCP tool called with its fixed arguments.
func (s *Service) readWatch(ctx context.Context, sc services.Schedule) (services.WatchContent, error) {
	if s.opts.Watcher == nil {
		return services.WatchContent{}, services.Errorf(services.EUNAVAILABLE, "this server cannot watch pages")
	}
	w := *sc.Watch
	if w.Tool == "" {
		return s.opts.Watcher.ReadWatch(ctx, w)
	}
	var t tools.Tool
	ok := false
	if s.opts.Tools != nil {
		t, ok = s.opts.Tools.Get(w.Tool)
	}
	switch {
	case !ok:
		return services.WatchContent{}, services.Errorf(services.ENOTFOUND, "watch.tool %q is not a tool of this server now (is its MCP server running?)", w.Tool)
	case t.Source == "":
		return services.WatchContent{}, services.Errorf(services.EINVALID, "watch.tool %q is not an MCP server's tool", w.Tool)
	case t.Effect != services.EffectRead:
		return services.WatchContent{}, services.Errorf(services.EINVALID, "watch.tool %q is not read-only (its effect is %s); a watch calls only read-only tools (MCP_SERVERS read_only lists tools known to change nothing)", w.Tool, t.Effect)
	}
	args := w.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	res := s.opts.Tools.Execute(ctx, w.Tool, tools.Call{TimelineScope: sc.TimelineScope, ContextScope: sc.Scope(), Arguments: args})
	if res.IsError {
		return services.WatchContent{}, services.Errorf(services.EUNAVAILABLE, "watch.tool %q answered an error: %s", w.Tool, truncateText(res.Content, 300))
	}
	return s.opts.Watcher.NormaliseWatch(w, w.Target(), res.Content)
}

// watchOrigin is the provenance of a watch's content.
func watchOrigin(w services.Watch, c services.WatchContent) services.Origin {
	if w.Tool != "" {
		return services.Origin{Kind: services.OriginMCP, Detail: w.Tool}
	}
	return services.Origin{Kind: services.OriginFetch, Detail: c.URL}
}

// watchInput is a watch fire's input: the task, the previous and new
// content and their diff, framed as untrusted data, and how to answer
// (one JSON object: the verdict the notification is decided by).
func (s *Service) watchInput(sc services.Schedule, at time.Time, c services.WatchContent) string {
	loc := s.opts.Fires.Location(sc)
	w := *sc.Watch
	origin := watchOrigin(w, c)
	var b strings.Builder
	fmt.Fprintf(&b, "Scheduled task %q (schedule #%d), due %s; it is now %s.\n", sc.Name, sc.ID,
		at.In(loc).Format("Mon 2006-01-02 15:04 MST"), time.Now().In(loc).Format("Mon 2006-01-02 15:04 MST"))
	b.WriteString("The owner does not see this conversation; your final answer decides what they hear.\n\n")
	b.WriteString("Task: " + sc.Task + "\n\n")
	b.WriteString("Watched: " + w.Target())
	if w.Selector != "" {
		b.WriteString(" (the elements matching `" + w.Selector + "`)")
	}
	if w.Pattern != "" {
		b.WriteString(" (the text matching `" + w.Pattern + "`)")
	}
	b.WriteString("\n")
	if sc.WatchHash == "" {
		b.WriteString("This is the first look at the watched content: there is nothing earlier to compare with. It is news only if it already shows what the task looks for.\n\n")
		b.WriteString("Content:\n" + services.UntrustedFrame(origin, truncateText(c.Text, watchPromptChars)) + "\n\n")
	} else {
		b.WriteString("The watched content changed since the last check (unchanged checks do not reach you).\n\n")
		b.WriteString("Previous content:\n" + services.UntrustedFrame(origin, truncateText(sc.WatchText, watchPromptChars)) + "\n\n")
		b.WriteString("New content:\n" + services.UntrustedFrame(origin, truncateText(c.Text, watchPromptChars)) + "\n\n")
		b.WriteString("Changes (- removed, + added):\n" + services.UntrustedFrame(origin, truncateText(lineDiff(sc.WatchText, c.Text), watchDiffChars)) + "\n\n")
	}
	b.WriteString(`Answer with one JSON object and nothing else: {"news": true or false, "message": "…"}. ` +
		`news is true when the change is something the task asks to hear about; message is then a short, self-contained message for the owner ` +
		`(what changed, with the URL). A change that does not matter to the task (layout, wording, other items) is not news.`)
	return b.String()
}

// watchVerdict reads a watch fire's structured answer: news and the
// message. An answer that is not the JSON object asked for counts as news
// unless it says NOTHING_NEW (the content did change).
func watchVerdict(answer string) (news bool, message string) {
	t := strings.TrimSpace(answer)
	if i, j := strings.IndexByte(t, '{'), strings.LastIndexByte(t, '}'); i >= 0 && j > i {
		var v struct {
			News    *bool  `json:"news"`
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(t[i:j+1]), &v) == nil && v.News != nil {
			msg := strings.TrimSpace(v.Message)
			if !*v.News || msg == "" {
				return false, services.NothingNew
			}
			return true, msg
		}
	}
	plain := strings.TrimSpace(strings.Trim(t, "`*_\"'."))
	if t == "" || strings.HasPrefix(strings.ToUpper(plain), services.NothingNew) {
		return false, services.NothingNew
	}
	return true, t
}

// lineDiff is a line diff of two texts: unchanged lines are left out,
// removed ones start with "- ", added ones with "+ ".
func lineDiff(old, new string) string {
	a, b := splitLines(old), splitLines(new)
	// Common head and tail are not part of the change.
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	var out []string
	if len(a)*len(b) > watchDiffCells {
		for _, l := range a {
			out = append(out, "- "+l)
		}
		for _, l := range b {
			out = append(out, "+ "+l)
		}
		return strings.Join(out, "\n")
	}
	// Longest common subsequence, then a walk that emits the edits.
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "- "+a[i])
			i++
		default:
			out = append(out, "+ "+b[j])
			j++
		}
	}
	return strings.Join(out, "\n")
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
