package telegram

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// Commands is the bot's command menu.
var Commands = []models.BotCommand{
	{Command: "new", Description: "Start a new conversation"},
	{Command: "stop", Description: "Stop the running answer"},
	{Command: "status", Description: "Show the agent's status"},
	{Command: "context", Description: "Show what the agent's context holds"},
	{Command: "compact", Description: "Summarise the history now"},
	{Command: "subagents", Description: "List sub-agent runs"},
	{Command: "tools", Description: "List the agent's tools and MCP servers"},
}

// SyncCommands sets the command menu with setMyCommands, only when it
// differs from the one last set (its hash is stored). It reports whether it
// called Telegram.
func (b *Bot) SyncCommands(ctx context.Context) (bool, error) {
	raw, _ := json.Marshal(Commands)
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])
	old, err := b.opts.Store.CommandsHash(ctx, b.botID)
	if err != nil {
		return false, err
	}
	if old == hash {
		return false, nil
	}
	if _, err := b.api.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: Commands}); err != nil {
		return true, err
	}
	return true, b.opts.Store.SetCommandsHash(ctx, b.botID, hash)
}
