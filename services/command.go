package services

import "strings"

// Commands are the chat commands every channel accepts.
var Commands = []string{"new", "stop", "status", "context", "compact", "subagents", "rules", "tools"}

// ParseCommand recognises "/name args" (also "/name@botname args", as
// Telegram sends in groups). Unknown names are not commands: they go to the
// agent as text.
func ParseCommand(text string) (name, args string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	head, _, _ = strings.Cut(head, "@")
	head = strings.ToLower(head)
	for _, c := range Commands {
		if c == head {
			return c, strings.TrimSpace(rest), true
		}
	}
	return "", "", false
}
