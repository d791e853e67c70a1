package telegram

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/switchboard/switchboard/services"
)

// Commands is the bot's command menu: the chat commands of every channel.
var Commands = func() []models.BotCommand {
	out := make([]models.BotCommand, 0, len(services.Commands))
	for _, c := range services.ListedCommands() {
		help := c.Help
		out = append(out, models.BotCommand{Command: c.Name, Description: strings.ToUpper(help[:1]) + help[1:]})
	}
	return out
}()

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
