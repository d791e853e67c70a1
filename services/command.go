package services

import (
	"context"
	"regexp"
	"strings"
)

// Command is a chat command every channel accepts; the agent answers it
// itself, without a model call. Commands is the one table of them: adding a
// command is its entry there (name, arguments, help, handler) and the
// handler's method, declared in CommandHandlers and written in
// services/agent.
type Command struct {
	Name string
	// Args is how its arguments are written ("" for none).
	Args string
	// Help says what it does, in the user's words.
	Help string
	// Hidden commands are answered but listed nowhere (not in /help nor a
	// channel's menu).
	Hidden bool
	// Run answers the command: the text of the system message that
	// replies to it (nil: the command is a run the agent queues instead).
	Run func(h CommandHandlers, ctx context.Context, c CommandCall) (string, error)
}

// CommandCall is one command as the owner sent it.
type CommandCall struct {
	// Message is the command's own message.
	Message Message
	// Args is the text after the command's name.
	Args string
}

// CommandHandlers answers the chat commands, one method per command
// (services/agent implements it).
type CommandHandlers interface {
	Help(ctx context.Context, c CommandCall) (string, error)
	Start(ctx context.Context, c CommandCall) (string, error)
	New(ctx context.Context, c CommandCall) (string, error)
	Stop(ctx context.Context, c CommandCall) (string, error)
	Retry(ctx context.Context, c CommandCall) (string, error)
	Status(ctx context.Context, c CommandCall) (string, error)
	Context(ctx context.Context, c CommandCall) (string, error)
	Pin(ctx context.Context, c CommandCall) (string, error)
	Unpin(ctx context.Context, c CommandCall) (string, error)
	Pins(ctx context.Context, c CommandCall) (string, error)
	Subagents(ctx context.Context, c CommandCall) (string, error)
	Rules(ctx context.Context, c CommandCall) (string, error)
	Tools(ctx context.Context, c CommandCall) (string, error)
	Schedules(ctx context.Context, c CommandCall) (string, error)
	Budget(ctx context.Context, c CommandCall) (string, error)
	Approve(ctx context.Context, c CommandCall) (string, error)
	Deny(ctx context.Context, c CommandCall) (string, error)
	Policy(ctx context.Context, c CommandCall) (string, error)
	Memory(ctx context.Context, c CommandCall) (string, error)
	Pair(ctx context.Context, c CommandCall) (string, error)
	Voice(ctx context.Context, c CommandCall) (string, error)
}

// Commands are the chat commands, in the order /help lists them.
var Commands = []Command{
	{Name: "help", Help: "list the commands", Run: CommandHandlers.Help},
	// Telegram clients send /start when someone first opens the bot.
	{Name: "start", Hidden: true, Run: CommandHandlers.Start},
	{Name: "new", Help: "start a fresh context (the history stays)", Run: CommandHandlers.New},
	{Name: "stop", Help: "stop the running answer (what was written so far is kept)", Run: CommandHandlers.Stop},
	{Name: "retry", Help: "ask the last question again after its answer failed or was stopped", Run: CommandHandlers.Retry},
	{Name: "status", Help: "the model, what is running, the last answer's token use", Run: CommandHandlers.Status},
	{Name: "context", Args: "[full]", Help: "what the next prompt would contain (full: its text, layer by layer)", Run: CommandHandlers.Context},
	{Name: "pin", Args: "PATH[#Section]", Help: "include a file, a section of it or its lines (PATH:12-30) in every prompt", Run: CommandHandlers.Pin},
	{Name: "unpin", Args: "PATH[#Section]", Help: "stop including a pinned file or section", Run: CommandHandlers.Unpin},
	{Name: "pins", Help: "what is pinned into the context", Run: CommandHandlers.Pins},
	// /compact is not answered at once: it queues a run of its own (Run nil).
	{Name: "compact", Args: "[focus]", Help: "summarise the older history now"},
	{Name: "subagents", Help: "recent delegated tasks", Run: CommandHandlers.Subagents},
	{Name: "rules", Args: "[add|remove|approve|reject …]", Help: "the standing rules, and rule proposals", Run: CommandHandlers.Rules},
	{Name: "tools", Help: "the agent's tools and MCP servers", Run: CommandHandlers.Tools},
	{Name: "schedules", Args: "[pause|resume|delete ID]", Help: "reminders and monitors, and their last results", Run: CommandHandlers.Schedules},
	{Name: "budget", Help: "today's spend (tokens, and dollars for priced models) per kind of run against the daily budgets, and the last 7 days", Run: CommandHandlers.Budget},
	{Name: "approve", Args: "[N]", Help: "approve a held tool call (no N: list what waits)", Run: CommandHandlers.Approve},
	{Name: "deny", Args: "N", Help: "deny a held tool call", Run: CommandHandlers.Deny},
	{Name: "policy", Help: "what the agent may do without asking", Run: CommandHandlers.Policy},
	{Name: "memory", Args: "[forget ID]", Help: "remembered items with their origin", Run: CommandHandlers.Memory},
	{Name: "pair", Args: "[approve|deny CODE]", Help: "Telegram users waiting for your approval; approve or deny one", Run: CommandHandlers.Pair},
	{Name: "voice", Args: "[on|off]", Help: "answer voice notes with a voice note too, in this chat (Telegram)", Run: CommandHandlers.Voice},
}

// ListedCommands are the Commands /help and the channels' menus list (all
// but the hidden ones), in order.
func ListedCommands() []Command {
	out := make([]Command, 0, len(Commands))
	for _, c := range Commands {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// LookupCommand returns the command called name.
func LookupCommand(name string) (Command, bool) {
	for _, c := range Commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// KnownCommand reports whether name is one of Commands.
func KnownCommand(name string) bool {
	_, ok := LookupCommand(name)
	return ok
}

var commandNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ParsedCommand is a command as a message's text writes it.
type ParsedCommand struct {
	Name string
	// Args is the text after the name.
	Args string
}

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
