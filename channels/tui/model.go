package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

// Backend is what the model asks of the server; *Client implements it.
// Calls run inside tea.Cmd goroutines, never in Update.
type Backend interface {
	// Post stores content with source tui; the same clientKey stores once.
	Post(ctx context.Context, content, clientKey string) (wire.Message, error)
	// Upload stores content with the file at path; the same clientKey
	// stores once.
	Upload(ctx context.Context, content, clientKey, path string) (wire.Message, error)
	// Timeline fetches a page (the model asks for older pages only).
	Timeline(ctx context.Context, q TimelineQuery) (wire.Page, error)
	// ToolResult fetches what a run's tool call returned (/result).
	ToolResult(ctx context.Context, runID int64, callID string) (wire.ToolResult, error)
}

var _ Backend = (*Client)(nil)

// PageSize is how many messages the first and every older page hold.
const PageSize = 50

// helpRow is one line of /help: how a command is written, what it does.
type helpRow struct{ usage, help string }

// helpRows are the server's commands, then the TUI's own.
var helpRows = func() []helpRow {
	var rows []helpRow
	for _, c := range services.ListedCommands() {
		if c.Name == "help" {
			continue
		}
		usage := "/" + c.Name
		if c.Args != "" {
			usage += " " + c.Args
		}
		rows = append(rows, helpRow{usage, c.Help})
	}
	return rows
}()

var localHelpRows = []helpRow{
	{"/attach PATH", "send the file at PATH (the text for it on the lines after)"},
	{"/result", "show what the last finished tool call returned"},
	{"/help", "this list"},
	{"/quit, Ctrl+C", "leave"},
}

const helpKeys = "Enter send · Alt+Enter or Ctrl+J new line · PgUp/PgDn or mouse wheel scroll " +
	"(PgUp at the top loads older messages) · Ctrl+End jump to the newest"

// minHelpColumn is the narrowest the text column of /help gets beside the
// commands; narrower, each command's text goes on the lines under it.
const minHelpColumn = 24

// helpText lists the commands for a terminal width columns wide (/help
// shows it without sending anything): the commands in one column as wide
// as the longest, what each does beside it, wrapped with a hanging indent
// (or, too narrow for that, on the lines under it).
func helpText(width int) string {
	width = max(width, 10)
	col := 0
	for _, r := range helpRows {
		col = max(col, ansi.StringWidth(r.usage))
	}
	for _, r := range localHelpRows {
		col = max(col, ansi.StringWidth(r.usage))
	}
	var b strings.Builder
	rows := func(rs []helpRow) {
		for _, r := range rs {
			if indent := 2 + col + 2; width-indent >= minHelpColumn {
				pad := strings.Repeat(" ", col+2-ansi.StringWidth(r.usage))
				b.WriteString(hangingIndent("  "+r.usage+pad, r.help, indent, width) + "\n")
			} else {
				b.WriteString("  " + r.usage + "\n" + hangingIndent("      ", r.help, 6, width) + "\n")
			}
		}
	}
	b.WriteString(hangingIndent("", "Commands (sent to the agent like any message; it answers as [system]):", 2, width) + "\n")
	rows(helpRows)
	b.WriteString("Local:\n")
	rows(localHelpRows)
	b.WriteString(hangingIndent("Keys: ", helpKeys, len("Keys: "), width))
	return b.String()
}

// hangingIndent is head followed by text wrapped at spaces to width, its
// lines after the first indented by indent columns.
func hangingIndent(head, text string, indent, width int) string {
	var b strings.Builder
	b.WriteString(head)
	lineW := ansi.StringWidth(head)
	start := lineW // where the line's text begins
	for _, w := range strings.Fields(text) {
		ww := ansi.StringWidth(w)
		if lineW > start && lineW+1+ww > width {
			b.WriteString("\n" + strings.Repeat(" ", indent))
			lineW, start = indent, indent
		}
		if lineW > start {
			b.WriteByte(' ')
			lineW++
		}
		b.WriteString(w)
		lineW += ww
	}
	return b.String()
}

// Messages the model sends itself from its commands.
type (
	olderMsg struct {
		page wire.Page
		err  error
	}
	postDoneMsg struct {
		key string
		msg wire.Message
		err error
	}
	retryPostMsg struct{}
)

// pendingPost is a message typed in the composer and not yet confirmed.
type pendingPost struct {
	content string
	key     string
	// file is the path of a file sent with the text (/attach).
	file    string
	lastErr string // why the last attempt failed; "" before the first answer
	// stored: the server's copy already arrived over the websocket while the
	// POST's own answer is still on its way; it is no longer shown as unsent.
	stored bool
}

// note is a local line shown after the message with id afterID (never sent).
type note struct {
	afterID int64
	text    string
	// help: the note is the command list, laid out for the width it is
	// shown at (text is unused).
	help bool
}

// runEnd is a run that ended other than ok, as the status line says it.
type runEnd struct {
	id     int64
	status string
}

func (r runEnd) String() string {
	if r.status == string(services.RunWaiting) {
		return fmt.Sprintf("agent run %d is waiting for your approval", r.id)
	}
	return fmt.Sprintf("agent run %d ended: %s", r.id, r.status)
}

// Options configures a Model.
type Options struct {
	// Initial is the first page, as loaded before the program starts.
	Initial wire.Page
	// ServerURL is shown in the status line.
	ServerURL string
	// Now and Location set the clock (tests); default time.Now and time.Local.
	Now      func() time.Time
	Location *time.Location
}

// Model is the bubbletea model of the terminal channel: the timeline in a
// viewport, a status line and a composer. Network results reach it as
// messages (MessageMsg, EventMsg, ConnMsg, …), so tests drive it directly.
type Model struct {
	backend Backend
	opts    Options

	tl           timeline
	hasOlder     bool
	loadingOlder bool
	notes        []note

	streams  map[int64]*stream // run id → streamed answer in progress
	finished map[int64]bool    // runs whose final message arrived
	runs     map[int64]string  // run id → queued/running

	conn    ConnState
	connErr string
	notice  string
	noticeN int
	// inputNotice: notice is about something typed (a path /attach could
	// not read, a post the server refused); the next post accepted clears it.
	inputNotice bool
	// runEnd is the newest run that ended other than ok, until a later
	// run's status or (for one waiting) the decision of its held calls.
	runEnd   runEnd
	outbox   []pendingPost
	posting  bool
	retryIn  time.Duration
	quitting bool

	width, height int
	rendered      map[int64]string // message id → rendering at width
	vp            viewport.Model
	ta            textarea.Model
}

var _ tea.Model = (*Model)(nil)

const composerHeight = 2

// NewModel returns a model showing opts.Initial.
func NewModel(b Backend, opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	ta := textarea.New()
	ta.Placeholder = "Message the agent (Enter sends, /help lists commands)"
	ta.Prompt = "› "
	ta.ShowLineNumbers = false
	ta.CharLimit = 32 << 10
	ta.FocusedStyle.CursorLine = ta.FocusedStyle.Text
	ta.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("alt+enter", "ctrl+j"))
	ta.SetHeight(composerHeight)
	ta.Focus()
	m := &Model{
		backend:  b,
		opts:     opts,
		hasOlder: opts.Initial.HasOlder,
		streams:  make(map[int64]*stream),
		finished: make(map[int64]bool),
		runs:     make(map[int64]string),
		rendered: make(map[int64]string),
		vp:       viewport.New(80, 24-1-composerHeight),
		ta:       ta,
		retryIn:  MinBackoff,
	}
	m.vp.KeyMap = viewport.KeyMap{} // keys belong to the composer; see Update
	m.vp.MouseWheelEnabled = false
	for _, msg := range opts.Initial.Messages {
		m.addMessage(msg)
	}
	m.resize(80, 24)
	return m
}

// Init starts the cursor blinking.
func (m *Model) Init() tea.Cmd { return textarea.Blink }

// NewestID is the largest message id the model holds.
func (m *Model) NewestID() int64 { return m.tl.newest() }

// Unsent is the text of posts the server has not confirmed yet.
func (m *Model) Unsent() []string {
	out := make([]string, 0, len(m.outbox))
	for _, p := range m.outbox {
		out = append(out, p.content)
	}
	return out
}

// Draft is the composer's text.
func (m *Model) Draft() string { return m.ta.Value() }

// Update handles keys, the mouse, resizes and the feed's messages.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	follow := m.vp.AtBottom()
	changed := true // whether the timeline's content may have changed
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
	case tea.KeyMsg:
		switch msg.String() {
		case "ctrl+c":
			m.quitting = true
			return m, tea.Quit
		case "enter":
			cmds = append(cmds, m.submit())
			follow = true
		case "pgup":
			m.vp.PageUp()
			cmds = append(cmds, m.maybeLoadOlder())
			follow = false
		case "pgdown":
			m.vp.PageDown()
			follow = m.vp.AtBottom()
		case "ctrl+end":
			follow = true
		case "ctrl+home":
			m.vp.GotoTop()
			cmds = append(cmds, m.maybeLoadOlder())
			follow = false
		default:
			var cmd tea.Cmd
			m.ta, cmd = m.ta.Update(msg)
			cmds = append(cmds, cmd)
			changed = false
		}
	case tea.MouseMsg:
		if msg.Action == tea.MouseActionPress {
			switch msg.Button {
			case tea.MouseButtonWheelUp:
				m.vp.ScrollUp(3)
				cmds = append(cmds, m.maybeLoadOlder())
				follow = false
			case tea.MouseButtonWheelDown:
				m.vp.ScrollDown(3)
				follow = m.vp.AtBottom()
			}
		}
	case MessageMsg:
		m.addMessage(msg.Message)
	case EventMsg:
		if msg.Event.Type == wire.EventTranscript {
			cmds = append(cmds, m.reload(msg.Event.ID))
			changed = false
			break
		}
		m.applyEvent(msg.Event)
	case resultMsg:
		if msg.err != nil {
			m.setInputNotice("the result could not be read: " + msg.err.Error())
		} else {
			m.clearInputNotice()
			m.notes = append(m.notes, note{afterID: m.tl.newest(), text: msg.text})
		}
	case reloadedMsg:
		if m.tl.replace(msg.msg) {
			delete(m.rendered, msg.msg.ID)
		}
	case ConnMsg:
		cmds = append(cmds, m.setConn(msg))
	case ProtocolErrorMsg:
		m.setNotice("protocol error, wire.Frame skipped: " + msg.Err.Error())
	case ServerErrorMsg:
		m.setNotice("server: " + msg.Text)
	case olderMsg:
		m.olderLoaded(msg)
		return m, nil // olderLoaded keeps the scroll position itself
	case postDoneMsg:
		cmds = append(cmds, m.postDone(msg))
	case retryPostMsg:
		cmds = append(cmds, m.startPost())
	default:
		var cmd tea.Cmd
		m.ta, cmd = m.ta.Update(msg) // cursor blink
		cmds = append(cmds, cmd)
		changed = false
	}
	if changed {
		m.refresh(follow)
	}
	return m, tea.Batch(cmds...)
}

// View draws the timeline, the status line and the composer.
func (m *Model) View() string {
	if m.quitting {
		return ""
	}
	return m.vp.View() + "\n" + m.statusLine() + "\n" + m.ta.View()
}

func (m *Model) resize(w, h int) {
	if w <= 0 || h <= 0 {
		return
	}
	if w != m.width {
		clear(m.rendered)
	}
	m.width, m.height = w, h
	m.ta.SetWidth(w)
	m.vp.Width = w
	m.vp.Height = max(h-1-composerHeight, 1)
	m.refresh(m.vp.AtBottom())
}

// refresh re-renders the timeline into the viewport; follow keeps the newest
// line in view.
func (m *Model) refresh(follow bool) {
	m.vp.SetContent(m.content())
	if follow {
		m.vp.GotoBottom()
	}
}

func (m *Model) content() string {
	now := m.opts.Now()
	var parts []string
	switch {
	case m.loadingOlder:
		parts = append(parts, dimStyle.Render("loading older messages…"))
	case m.hasOlder:
		parts = append(parts, dimStyle.Render("↑ PgUp for older messages"))
	default:
		parts = append(parts, dimStyle.Render("— beginning of the timeline —"))
	}
	ni := 0
	notesUpTo := func(id int64) {
		for ; ni < len(m.notes) && m.notes[ni].afterID <= id; ni++ {
			text := m.notes[ni].text
			if m.notes[ni].help {
				text = helpText(m.width)
			}
			parts = append(parts, noteStyle.Render(ansi.Wrap(text, max(m.width, 10), "")))
		}
	}
	for _, msg := range m.tl.msgs {
		notesUpTo(msg.ID - 1)
		r, ok := m.rendered[msg.ID]
		if !ok {
			r = renderMessage(msg, m.width, now, m.opts.Location, m.opts.ServerURL)
			m.rendered[msg.ID] = r
		}
		parts = append(parts, r)
	}
	notesUpTo(1<<63 - 1)
	runIDs := make([]int64, 0, len(m.streams))
	for id := range m.streams {
		runIDs = append(runIDs, id)
	}
	sort.Slice(runIDs, func(i, j int) bool { return runIDs[i] < runIDs[j] })
	for _, id := range runIDs {
		parts = append(parts, renderStream(m.streams[id], m.width, now, m.opts.Location))
	}
	for _, p := range m.outbox {
		if !p.stored {
			parts = append(parts, renderPending(p, m.width))
		}
	}
	return strings.Join(parts, "\n")
}

func (m *Model) statusLine() string {
	var conn string
	switch m.conn {
	case Live:
		conn = liveStyle.Render(" ● live ")
	case Offline:
		conn = offlineStyle.Render(" ○ offline — reconnecting… ")
	default:
		conn = statusStyle.Render(" ◌ connecting… ")
	}
	var bits []string
	if m.conn == Offline && m.connErr != "" {
		bits = append(bits, m.connErr)
	}
	working, queued := false, false
	for _, st := range m.runs {
		switch st {
		case string(services.RunRunning):
			working = true
		case string(services.RunQueued):
			queued = true
		}
	}
	switch {
	case working:
		bits = append(bits, "agent is working…")
	case queued:
		bits = append(bits, "agent run queued…")
	}
	if m.runEnd.id != 0 {
		bits = append(bits, m.runEnd.String())
	}
	if n := len(m.outbox); n > 0 {
		bits = append(bits, fmt.Sprintf("%d unsent", n))
	}
	if m.notice != "" {
		n := m.notice
		if m.noticeN > 1 {
			n += fmt.Sprintf(" (×%d)", m.noticeN)
		}
		bits = append(bits, n)
	}
	if len(bits) == 0 {
		bits = append(bits, m.opts.ServerURL+" · /help")
	}
	rest := strings.Join(bits, " · ") + " "
	w := m.width - ansi.StringWidth(conn)
	if w < 1 {
		return ansi.Truncate(conn, m.width, "")
	}
	rest = ansi.Truncate(rest, w, "…")
	if pad := w - ansi.StringWidth(rest); pad > 0 {
		rest += strings.Repeat(" ", pad)
	}
	return conn + statusStyle.Render(rest)
}

func (m *Model) setNotice(s string) {
	m.inputNotice = false
	if s == m.notice {
		m.noticeN++
		return
	}
	m.notice, m.noticeN = s, 1
}

// setInputNotice shows a problem with what was typed, which the next post
// accepted clears (clearInputNotice).
func (m *Model) setInputNotice(s string) {
	m.setNotice(s)
	m.inputNotice = true
}

func (m *Model) clearInputNotice() {
	if m.inputNotice {
		m.notice, m.noticeN, m.inputNotice = "", 0, false
	}
}

func (m *Model) addMessage(msg wire.Message) {
	if !m.tl.add(msg) {
		return
	}
	// Posts go out one at a time, oldest first: a tui message with the text
	// of the one in flight is its stored copy.
	if m.posting && len(m.outbox) > 0 && msg.Source == "tui" && msg.Content == m.outbox[0].content {
		m.outbox[0].stored = true
	}
	md := meta(msg)
	if msg.Approval != nil && md.Notice != "approval" {
		// A decision, made on any channel: the request shows it.
		for _, id := range m.tl.decided(*msg.Approval) {
			delete(m.rendered, id)
		}
		// The run that waited for it no longer does once none of its
		// calls waits (a resumed run's status follows).
		if m.runEnd.status == string(services.RunWaiting) && (md.RunID == 0 || md.RunID == m.runEnd.id) &&
			!m.tl.waiting(m.runEnd.id) {
			m.runEnd = runEnd{}
		}
	}
	if md.RunID > 0 && msg.Role != "user" && md.Kind != "handoff" {
		// The final answer replaces the streamed bubble of its run.
		delete(m.streams, md.RunID)
		delete(m.runs, md.RunID)
		m.finished[md.RunID] = true
	}
}

func (m *Model) applyEvent(e wire.Event) {
	switch e.Type {
	case wire.EventDelta:
		if e.RunID == 0 || m.finished[e.RunID] {
			return // a late delta of an answer already shown
		}
		var d wire.DeltaData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			m.setNotice("protocol error, bad delta event: " + err.Error())
			return
		}
		s := m.streams[e.RunID]
		if s == nil {
			s = &stream{runID: e.RunID, started: m.opts.Now()}
			m.streams[e.RunID] = s
		}
		s.text.WriteString(d.Text)
		if _, ok := m.runs[e.RunID]; !ok {
			m.runs[e.RunID] = string(services.RunRunning)
		}
	case wire.EventTool:
		if e.RunID == 0 || m.finished[e.RunID] {
			return
		}
		var u wire.ToolUse
		if err := json.Unmarshal(e.Data, &u); err != nil {
			m.setNotice("protocol error, bad tool event: " + err.Error())
			return
		}
		s := m.streams[e.RunID]
		if s == nil {
			s = &stream{runID: e.RunID, started: m.opts.Now()}
			m.streams[e.RunID] = s
		}
		replaced := false
		for i := range s.tools {
			if s.tools[i].ID == u.ID {
				s.tools[i], replaced = u, true
			}
		}
		if !replaced {
			s.tools = append(s.tools, u)
		}
	case wire.EventRun:
		var d wire.RunData
		if err := json.Unmarshal(e.Data, &d); err != nil || d.Status == "" {
			m.setNotice("protocol error, bad run event")
			return
		}
		if e.RunID >= m.runEnd.id {
			m.runEnd = runEnd{} // a later run's status replaces how an earlier one ended
		}
		switch d.Status {
		case string(services.RunQueued), string(services.RunRunning):
			if !m.finished[e.RunID] {
				m.runs[e.RunID] = d.Status
			}
		default:
			delete(m.runs, e.RunID)
			if d.Status != string(services.RunOK) {
				m.runEnd = runEnd{id: e.RunID, status: d.Status}
				if s := m.streams[e.RunID]; s != nil {
					s.ended = d.Status
				}
			}
		}
	}
}

func (m *Model) setConn(c ConnMsg) tea.Cmd {
	prev := m.conn
	m.conn = c.State
	m.connErr = ""
	if c.Err != nil {
		m.connErr = c.Err.Error()
	}
	if c.State == Live && prev == Offline {
		// Run events are not replayed: forget statuses we may have missed
		// the end of; a live run's next event brings it back.
		clear(m.runs)
	}
	if c.State == Live && !m.posting && len(m.outbox) > 0 {
		m.retryIn = MinBackoff
		return m.startPost()
	}
	return nil
}

// submit handles Enter in the composer.
func (m *Model) submit() tea.Cmd {
	text := strings.TrimSpace(m.ta.Value())
	if text == "" {
		return nil
	}
	switch strings.Fields(text)[0] {
	case "/help", "/?":
		m.ta.Reset()
		m.notes = append(m.notes, note{afterID: m.tl.newest(), help: true})
		return nil
	case "/quit", "/exit":
		m.quitting = true
		return tea.Quit
	case "/attach":
		return m.attach(text)
	case "/result":
		m.ta.Reset()
		return m.lastResult()
	}
	m.ta.Reset()
	m.clearInputNotice()
	m.outbox = append(m.outbox, pendingPost{content: text, key: NewClientKey()})
	return m.startPost()
}

// attach queues "/attach PATH" (text on the following lines) as a post
// with the file; a file that is not there is named at once and the
// composer kept.
func (m *Model) attach(text string) tea.Cmd {
	first, rest, _ := strings.Cut(text, "\n")
	path := strings.TrimSpace(strings.TrimPrefix(first, "/attach"))
	if path == "" {
		m.setInputNotice("usage: /attach PATH (the text for the file on the lines after)")
		return nil
	}
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, path[2:])
		}
	}
	info, err := os.Stat(path)
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file")
	}
	if err != nil {
		m.setInputNotice("not attached: " + path + ": " + strings.TrimPrefix(err.Error(), "stat "+path+": "))
		return nil
	}
	m.ta.Reset()
	m.clearInputNotice()
	m.outbox = append(m.outbox, pendingPost{content: strings.TrimSpace(rest), key: NewClientKey(), file: path})
	return m.startPost()
}

// resultMsg is a tool call's result, written for the terminal (/result).
type resultMsg struct {
	text string
	err  error
}

// resultLines is how much of a result /result shows; the page shows it whole.
const resultLines = 40

// lastResult fetches what the newest finished tool call on the timeline
// returned and shows it as a note; without one it says so.
func (m *Model) lastResult() tea.Cmd {
	for i := len(m.tl.msgs) - 1; i >= 0; i-- {
		msg := m.tl.msgs[i]
		var meta struct {
			RunID int64 `json:"run_id"`
		}
		if len(msg.Tools) == 0 || json.Unmarshal(msg.Metadata, &meta) != nil || meta.RunID == 0 {
			continue
		}
		for j := len(msg.Tools) - 1; j >= 0; j-- {
			if tu := msg.Tools[j]; tu.Status != "running" && tu.ID != "" {
				return m.fetchResult(meta.RunID, tu)
			}
		}
	}
	m.setInputNotice("no finished tool call on the timeline yet")
	return nil
}

func (m *Model) fetchResult(runID int64, tu wire.ToolUse) tea.Cmd {
	b := m.backend
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		r, err := b.ToolResult(ctx, runID, tu.ID)
		if err != nil {
			return resultMsg{err: err}
		}
		return resultMsg{text: resultText(r, tu.Arg)}
	}
}

// resultText is a tool result as /result shows it: the call, then at most
// resultLines lines of what it returned, and the images by name.
func resultText(r wire.ToolResult, arg string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Result of %s", r.Tool)
	if arg != "" {
		fmt.Fprintf(&b, " %s", arg)
	}
	if r.IsError {
		b.WriteString(" (an error)")
	}
	b.WriteString(":\n")
	lines := strings.Split(strings.TrimRight(r.Content, "\n"), "\n")
	more := len(lines) - resultLines
	if more > 0 {
		lines = lines[:resultLines]
	}
	b.WriteString(strings.Join(lines, "\n"))
	if more > 0 || r.Truncated {
		fmt.Fprintf(&b, "\n… (%d characters in all; the chat page shows the result whole)", r.Chars)
	}
	for _, im := range r.Images {
		fmt.Fprintf(&b, "\n[image %s, %s]", im.Name, im.URL)
	}
	return b.String()
}

// reloadedMsg is a message read again (a voice note with its transcript).
type reloadedMsg struct{ msg wire.Message }

// reload reads message id again; a failure leaves it as shown.
func (m *Model) reload(id int64) tea.Cmd {
	if id <= 0 {
		return nil
	}
	b := m.backend
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		page, err := b.Timeline(ctx, TimelineQuery{After: id - 1, Limit: 1})
		if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != id {
			return nil
		}
		return reloadedMsg{msg: page.Messages[0]}
	}
}

// startPost sends the oldest unconfirmed post, one at a time so they are
// stored in the order typed.
func (m *Model) startPost() tea.Cmd {
	if m.posting || len(m.outbox) == 0 {
		return nil
	}
	m.posting = true
	p := m.outbox[0]
	b := m.backend
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var msg wire.Message
		var err error
		if p.file != "" {
			msg, err = b.Upload(ctx, p.content, p.key, p.file)
		} else {
			msg, err = b.Post(ctx, p.content, p.key)
		}
		return postDoneMsg{key: p.key, msg: msg, err: err}
	}
}

func (m *Model) postDone(d postDoneMsg) tea.Cmd {
	m.posting = false
	if len(m.outbox) == 0 || m.outbox[0].key != d.key {
		return m.startPost()
	}
	if d.err == nil {
		m.outbox = m.outbox[1:]
		m.retryIn = MinBackoff
		if d.msg.ID > 0 {
			m.addMessage(d.msg)
		}
		return m.startPost()
	}
	if !retryable(d.err) {
		// The server will never take it: give the text back, say why.
		p := m.outbox[0]
		m.outbox = m.outbox[1:]
		if cur := m.ta.Value(); cur != "" {
			m.ta.SetValue(p.content + "\n" + cur)
		} else {
			m.ta.SetValue(p.content)
		}
		m.setInputNotice("not sent (kept in the composer): " + d.err.Error())
		return m.startPost()
	}
	m.outbox[0].lastErr = shortErr(d.err)
	wait := m.retryIn
	m.retryIn = min(m.retryIn*2, MaxBackoff)
	return tea.Tick(wait, func(time.Time) tea.Msg { return retryPostMsg{} })
}

// retryable: network failures, 429 and 5xx; the same client_key makes the
// retry store at most one message.
func retryable(err error) bool {
	var api *APIError
	if errors.As(err, &api) {
		return api.Temporary()
	}
	return !errors.Is(err, ErrUnauthorized)
}

func shortErr(err error) string {
	var re *ReachError
	if errors.As(err, &re) {
		return re.Reason
	}
	return err.Error()
}

// maybeLoadOlder asks for the page before the oldest message once the view
// is at the top.
func (m *Model) maybeLoadOlder() tea.Cmd {
	if !m.vp.AtTop() || !m.hasOlder || m.loadingOlder {
		return nil
	}
	m.loadingOlder = true
	before := m.tl.oldest()
	b := m.backend
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		page, err := b.Timeline(ctx, TimelineQuery{Before: before, Limit: PageSize})
		return olderMsg{page: page, err: err}
	}
}

func (m *Model) olderLoaded(o olderMsg) {
	m.loadingOlder = false
	before := m.vp.TotalLineCount()
	offset := m.vp.YOffset
	if o.err != nil {
		m.setNotice("could not load older messages: " + o.err.Error())
	} else {
		for _, msg := range o.page.Messages {
			m.addMessage(msg)
		}
		m.hasOlder = o.page.HasOlder && len(o.page.Messages) > 0
	}
	m.vp.SetContent(m.content())
	// Keep the lines that were on screen where they were.
	m.vp.SetYOffset(offset + m.vp.TotalLineCount() - before)
}
