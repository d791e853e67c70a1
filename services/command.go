package services

import (
	"regexp"
	"strings"
)

// Command is a chat command every channel accepts; the agent answers it
// itself, without a model call.
type Command struct {
	Name string
	// Args is how its arguments are written ("" for none).
	Args string
	// Help says what it does, in the user's words.
	Help string
}

// Commands are the chat commands, in the order /help lists them.
var Commands = []Command{
	{Name: "help", Help: "list the commands"},
	{Name: "new", Help: "start a fresh context (the history stays)"},
	{Name: "stop", Help: "stop the running answer (what was written so far is kept)"},
	{Name: "retry", Help: "ask the last question again after its answer failed or was stopped"},
	{Name: "status", Help: "the model, what is running, the last answer's token use"},
	{Name: "context", Args: "[full]", Help: "what the next prompt would contain (full: its text, layer by layer)"},
	{Name: "pin", Args: "PATH[#Section]", Help: "include a file, a section of it or its lines (PATH:12-30) in every prompt"},
	{Name: "unpin", Args: "PATH[#Section]", Help: "stop including a pinned file or section"},
	{Name: "pins", Help: "what is pinned into the context"},
	{Name: "compact", Args: "[focus]", Help: "summarise the older history now"},
	{Name: "subagents", Help: "recent delegated tasks"},
	{Name: "rules", Args: "[add|remove|approve|reject …]", Help: "the standing rules, and rule proposals"},
	{Name: "tools", Help: "the agent's tools and MCP servers"},
	{Name: "schedules", Args: "[pause|resume|delete ID]", Help: "reminders and monitors, and their last results"},
	{Name: "budget", Help: "today's spend (tokens, and dollars for priced models) per kind of run against the daily budgets, and the last 7 days"},
	{Name: "approve", Args: "[N]", Help: "approve a held tool call (no N: list what waits)"},
	{Name: "deny", Args: "N", Help: "deny a held tool call"},
	{Name: "policy", Help: "what the agent may do without asking"},
	{Name: "memory", Args: "[forget ID]", Help: "remembered items with their origin"},
}

// KnownCommand reports whether name is one of Commands.
func KnownCommand(name string) bool {
	for _, c := range Commands {
		if c.Name == name {
			return true
		}
	}
	return false
}

var commandNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ParseCommand recognises "/name args" (also "/name@botname args", as
// Telegram sends in groups). Any such name is a command: an unknown one is
// answered "unknown command, see /help", not sent to the model. Text that
// merely starts with a slash ("/etc/hosts is missing") is not a command.
func ParseCommand(text string) (name, args string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(head, "\n\t"); i >= 0 {
		head, rest = head[:i], head[i+1:]+" "+rest
	}
	head, _, _ = strings.Cut(head, "@")
	head = strings.ToLower(head)
	if !commandNameRE.MatchString(head) {
		return "", "", false
	}
	return head, strings.TrimSpace(rest), true
}
