package tui

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

// Styles of the timeline and status line. Colours degrade to plain text on
// terminals without colour (and in tests).
var (
	timeStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("245"))
	roleStyle    = lipgloss.NewStyle().Bold(true)
	dimStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("244"))
	handoffStyle = lipgloss.NewStyle().Foreground(lipgloss.Color("141")).Italic(true)
	noteStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("110"))
	warnStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("203"))
	statusStyle  = lipgloss.NewStyle().Reverse(true)
	liveStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("42")).Reverse(true)
	offlineStyle = lipgloss.NewStyle().Foreground(lipgloss.Color("203")).Reverse(true)
	labelStyles  = map[string]lipgloss.Style{
		"telegram": lipgloss.NewStyle().Foreground(lipgloss.Color("39")),
		"web":      lipgloss.NewStyle().Foreground(lipgloss.Color("170")),
		"tui":      lipgloss.NewStyle().Foreground(lipgloss.Color("42")),
		"api":      lipgloss.NewStyle().Foreground(lipgloss.Color("214")),
		"system":   lipgloss.NewStyle().Foreground(lipgloss.Color("244")),
		"agent":    lipgloss.NewStyle().Foreground(lipgloss.Color("141")),
	}
)

// label renders a channel label: "[telegram]".
func label(source string) string {
	if source == "" {
		source = "?"
	}
	st, ok := labelStyles[source]
	if !ok {
		st = dimStyle
	}
	return st.Render("[" + source + "]")
}

// clock renders a time in the local zone: "15:04" today, "Jan 02 15:04"
// on another day.
func clock(t, now time.Time, loc *time.Location) string {
	t = t.In(loc)
	now = now.In(loc)
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04")
	}
	return t.Format("Jan 02 15:04")
}

// tabWidth is the distance between tab stops when a tab becomes spaces.
const tabWidth = 4

// sanitize makes untrusted text safe for a terminal: no escape sequences or
// other control characters (a message could otherwise move the cursor or
// retitle the window), tabs as spaces up to the next tab stop (so code
// indented with tabs keeps its shape).
func sanitize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	col := 0
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteRune(r)
			col = 0
		case r == '\t':
			n := tabWidth - col%tabWidth
			b.WriteString(strings.Repeat(" ", n))
			col += n
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
			col++
		}
	}
	return b.String()
}

// entry renders one timeline entry: a header ("15:04 [tui] user:") followed
// by the text, wrapped to width, continuation lines indented by two.
func entry(header, text string, width int) string {
	if width < 10 {
		width = 10
	}
	var b strings.Builder
	for i, line := range strings.Split(text, "\n") {
		if i == 0 {
			line = header + " " + line
		}
		wrapped := ansi.Wrap(line, width-2, "")
		for j, w := range strings.Split(wrapped, "\n") {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			if i > 0 || j > 0 {
				b.WriteString("  ")
			}
			b.WriteString(w)
		}
	}
	return b.String()
}

// renderMessage renders a stored message; handoffs are one compact line.
// Attachments are lines under the text, with their download URL on base.
func renderMessage(m wire.Message, width int, now time.Time, loc *time.Location, base string) string {
	ts := timeStyle.Render(clock(m.CreatedAt, now, loc))
	content := sanitize(m.Content)
	md := meta(m)
	if md.Kind == "handoff" {
		agent := m.AgentID
		if agent == "" {
			agent = md.AgentID
		}
		if agent == "" {
			agent = "sub-agent"
		}
		first := strings.TrimSpace(content)
		if i := strings.IndexByte(first, '\n'); i >= 0 {
			first = strings.TrimSpace(first[:i])
		}
		line := "⇄ handoff from " + sanitize(agent) + ": " + first
		return ansi.Truncate(ts+" "+handoffStyle.Render(line), max(width, 10), "…")
	}
	header := ts + " " + label(m.Source) + " " + roleStyle.Render(m.Role+":")
	if m.Role == "assistant" {
		// Answers are Markdown: rendered for the terminal, with the tool
		// calls of the run under them. An approval's request shows its
		// held call and how it stands; a decision's notice only its text.
		switch {
		case m.Approval != nil && md.Notice == "approval":
			content = markdown(m.Content) + toolLines(heldTools(m.Tools, *m.Approval)) + approvalLine(*m.Approval)
		case m.Approval != nil:
			content = markdown(m.Content)
		default:
			content = markdown(m.Content) + toolLines(m.Tools)
		}
	}
	files := attachmentLines(m.Attachments, base)
	if strings.TrimSpace(content) == "" {
		files = strings.TrimPrefix(files, "\n")
	}
	return entry(header, content+files, width)
}

// approvalWords say how an approval stands.
var approvalWords = map[string]string{"approved": "approved", "executing": "approved · running", "executed": "approved · ran",
	"interrupted": "approved · interrupted by a restart, not run again", "denied": "denied",
	"timed_out": "timed out (nobody decided in time)", "cancelled": "cancelled (/stop)"}

// heldTools are a request's tool calls with the held one (the run has no
// result for it) marked with the approval's state.
func heldTools(tools []wire.ToolUse, a wire.Approval) []wire.ToolUse {
	out := append([]wire.ToolUse(nil), tools...)
	found := false
	for i := range out {
		if out[i].ID == a.CallID {
			out[i].Status, found = "held:"+a.State, true
		}
	}
	if !found {
		out = append(out, wire.ToolUse{ID: a.CallID, Name: a.Tool, Status: "held:" + a.State})
	}
	return out
}

// approvalLine says, under its request, how an approval stands: what to
// type while it waits, then its decision and the channel that made it.
func approvalLine(a wire.Approval) string {
	if a.State == "pending" {
		return "\n" + warnStyle.Render(fmt.Sprintf("⏸ waiting for your decision: /approve %d or /deny %d", a.ID, a.ID))
	}
	word, ok := approvalWords[a.State]
	if !ok {
		word = sanitize(a.State)
	}
	mark := toolOK.Render("✓ ")
	if approvalRank[a.State] == 1 && a.State != "approved" || a.State == "interrupted" {
		mark = warnStyle.Render("✗ ")
	}
	if a.DecidedBy != "" && a.State != "timed_out" && a.DecidedBy != "stop" {
		word += " via " + sanitize(a.DecidedBy)
	}
	return "\n" + mark + word
}

// attachmentLines are a message's files, one line each: name, kind and
// size, the URL to download it (the owner's token is needed), and a voice
// note's transcript.
func attachmentLines(files []wire.Attachment, base string) string {
	var b strings.Builder
	for _, a := range files {
		fmt.Fprintf(&b, "\n📎 %s · %s · %s · %s", sanitize(a.Name), a.Kind, services.HumanBytes(a.Size), strings.TrimRight(base, "/")+a.URL)
		if a.Transcription != "" {
			b.WriteString("\n   “" + sanitize(a.Transcription) + "”")
		}
	}
	return b.String()
}

// stream is an answer being streamed by a run, shown until its final message.
type stream struct {
	runID   int64
	text    strings.Builder
	started time.Time
	// ended is a terminal status other than ok (the answer will not finish).
	ended string
	// tools are the run's tool calls seen so far.
	tools []wire.ToolUse
}

func renderStream(s *stream, width int, now time.Time, loc *time.Location) string {
	header := timeStyle.Render(clock(s.started, now, loc)) + " " + label("agent") + " " + roleStyle.Render("assistant:")
	text := sanitize(s.text.String())
	if s.ended != "" {
		text += " " + warnStyle.Render("["+s.ended+"]")
	} else {
		text += "▍"
	}
	return entry(header, text+toolLines(s.tools), width)
}

// renderPending renders a post not yet confirmed by the server.
func renderPending(p pendingPost, width int) string {
	header := timeStyle.Render("··:··") + " " + label(SourceTUI) + " " + roleStyle.Render("user:")
	state := "(sending…)"
	if p.lastErr != "" {
		state = "(not sent yet, will retry: " + p.lastErr + ")"
	}
	text := sanitize(p.content)
	if p.file != "" {
		text = strings.TrimSpace(text + " 📎 " + sanitize(p.file))
	}
	return entry(header, text+" "+dimStyle.Render(state), width)
}
