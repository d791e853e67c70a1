package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// pairingKeyboard is the Approve / Deny buttons under a stranger's pairing
// request in the owner's chat.
func pairingKeyboard(code string) *models.InlineKeyboardMarkup {
	return &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{
		{Text: "Approve", CallbackData: "pair:approve:" + code},
		{Text: "Deny", CallbackData: "pair:deny:" + code},
	}}}
}

// parsePairingDecision reads a pairing button's callback data
// ("pair:approve:K7M2QX", "pair:deny:K7M2QX").
func parsePairingDecision(data string) (code string, approve bool, ok bool) {
	rest, found := strings.CutPrefix(data, "pair:")
	if !found {
		return "", false, false
	}
	verb, code, found := strings.Cut(rest, ":")
	if !found || code == "" || len(code) > 32 || (verb != "approve" && verb != "deny") {
		return "", false, false
	}
	return code, verb == "approve", true
}

// strangerName is a stranger's chosen name for a Markdown notice: in a
// code span, so a name cannot make a link or formatting.
func strangerName(p services.Pairing) string {
	name := strings.ReplaceAll(p.DisplayName, "`", "'")
	if strings.TrimSpace(name) == "" {
		name = "someone"
	}
	return "`" + name + "`"
}

// pairingAsk is what the owner is told of a stranger's request.
func pairingAsk(p services.Pairing) string {
	return fmt.Sprintf("%s (Telegram id %d) asks to talk to the agent. Code `%s`, valid until %s UTC. "+
		"Approve or deny with the buttons (here or on the chat page), or `switchboard pair approve %s`.",
		strangerName(p), p.UserID, p.Code, p.ExpiresAt.UTC().Format("15:04"), p.Code)
}

// announcePairing tells the owner at once of a new pairing request: a
// notice in the owner's timeline (the page shows it with Approve and Deny
// buttons, the TUI as text) and a message with the buttons in each owner's
// Telegram chat. Keyed by the code: a retried update announces nothing twice.
func (b *Bot) announcePairing(ctx context.Context, p services.Pairing) error {
	text := pairingAsk(p)
	if _, _, err := b.opts.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceSystem,
		Role: services.RoleAssistant, Content: text, DedupeKey: fmt.Sprintf("pairing:%d:%s", p.UserID, p.Code),
		Metadata: services.MessageMeta{Notice: "pairing", PairingCode: p.Code}.Encode()}); err != nil {
		return err
	}
	for owner := range b.owners {
		if err := enqueue(ctx, b.opts.Queue, OutboundPayload{Key: fmt.Sprintf("pairing-ask:%s:%d", p.Code, owner),
			ChatID: owner, Text: text, PairingCode: p.Code}); err != nil {
			return err
		}
	}
	return nil
}

// handlePairingPress answers a press of a pairing request's buttons: only
// the owner decides; the decision goes through Deps.Pairings (the Desk:
// the stranger is told and the request in each owner's chat is edited to
// show the outcome, without its buttons) and the press is answered. A
// press on a request already decided or expired edits the request to say
// so.
func (b *Bot) handlePairingPress(ctx context.Context, q *models.CallbackQuery, code string, approve bool) error {
	var answer string
	switch {
	case !b.owners[q.From.ID]:
		answer = "Only the owner decides pairings."
	case b.opts.Pairings == nil:
		answer = "Pairings are not available here."
	default:
		decide := b.opts.Pairings.DenyPairing
		if approve {
			decide = b.opts.Pairings.ApprovePairing
		}
		p, err := decide(ctx, code)
		switch {
		case err == nil:
			answer = fmt.Sprintf("%s %s.", decisionWord(approve), p.DisplayName)
			answer = strings.ToUpper(answer[:1]) + answer[1:]
			if b.opts.Audit != nil {
				if _, aerr := b.opts.Audit.AppendAudit(ctx, services.PairingAudit(string(Channel), decisionWord(approve), p)); aerr != nil {
					b.log.Error("audit: pairing decision not recorded", "user_id", p.UserID, "err", aerr)
				}
			}
			// The request is edited once, by the Desk, in every owner's
			// chat wherever the decision was made (showPairingDecided):
			// editing it here too would be a second edit of the same
			// message to almost the same text.
		case services.IsKind(err, services.ENOTFOUND):
			answer = services.ErrorMessage(err)
			b.showDecision(ctx, q, answer)
		case services.IsKind(err, services.EUNAVAILABLE):
			return err
		default:
			answer = services.ErrorMessage(err)
		}
	}
	if _, err := b.api.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: q.ID, Text: truncateRunes(answer, 200)}); err != nil {
		b.log.Warn("telegram: answer a button press", "err", err)
	}
	return nil
}

// showPairingDecided edits the pairing request with code p.PairingDecided
// in p's chat to end with the decision (p.PairingOutcome), without its
// buttons, whichever place decided it: a request decided on the page or
// with `switchboard pair` no longer offers buttons. A request never
// delivered to this chat is left alone; Telegram's refusals are logged
// (an owner's press already edited it: "message is not modified").
func (b *Bot) showPairingDecided(ctx context.Context, p OutboundPayload) error {
	id, err := b.opts.Store.LastSentMessage(ctx, fmt.Sprintf("pairing-ask:%s:%d", p.PairingDecided, p.ChatID))
	if err != nil || id == 0 {
		return err
	}
	var html string
	for _, c := range Split(p.PairingOutcome, MaxMessageLen) {
		html += c.HTML
	}
	if strings.TrimSpace(visibleText(html)) == "" {
		return nil
	}
	return b.editRequest(ctx, p.ChatID, id, html)
}

// PairingStore keeps pairings (repository.TelegramStore).
type PairingStore interface {
	ListPairings(ctx context.Context) ([]services.Pairing, error)
	ApprovePairing(ctx context.Context, code string) (services.Pairing, error)
	DenyPairing(ctx context.Context, code string) (services.Pairing, error)
}

// Desk is services.Pairings for every place the owner decides (the page,
// the buttons, `switchboard pair`): it decides through the store, then
// tells the stranger in their chat and the owner's timeline (a
// "pairing_decided" notice the page marks the request's card with).
// Telling is keyed by the code, so it happens once per decision.
type Desk struct {
	Store PairingStore
	Chat  Poster
	Queue services.OutboundQueue
	// Owners are the owner's Telegram chats, where the request was sent
	// with buttons: a decision made anywhere edits it there to show the
	// outcome, without its buttons.
	Owners []int64
	Logger *slog.Logger
}

var _ services.Pairings = (*Desk)(nil)

// ListPairings lists pairings as the store does.
func (d *Desk) ListPairings(ctx context.Context) ([]services.Pairing, error) {
	return d.Store.ListPairings(ctx)
}

// ApprovePairing approves the pending pairing with code and tells both people.
func (d *Desk) ApprovePairing(ctx context.Context, code string) (services.Pairing, error) {
	p, err := d.Store.ApprovePairing(ctx, code)
	if err == nil {
		d.tell(ctx, p, true)
	}
	return p, err
}

// DenyPairing refuses the pending pairing with code and tells both people.
func (d *Desk) DenyPairing(ctx context.Context, code string) (services.Pairing, error) {
	p, err := d.Store.DenyPairing(ctx, code)
	if err == nil {
		d.tell(ctx, p, false)
	}
	return p, err
}

// tell sends the stranger the decision and notes it in the owner's
// timeline. The decision stands when telling fails (logged).
func (d *Desk) tell(ctx context.Context, p services.Pairing, approved bool) {
	stranger := "The owner did not approve your request: nothing you send reaches the assistant. You may ask again later."
	owner := fmt.Sprintf("Denied: %s (Telegram id %d) cannot talk to the agent.", strangerName(p), p.UserID)
	if approved {
		stranger = "The owner approved you: you can talk to the assistant now. Send your message again."
		owner = fmt.Sprintf("Approved: %s (Telegram id %d) can talk to the agent now, in their own conversation (they see nothing of yours).", strangerName(p), p.UserID)
	}
	key := fmt.Sprintf("pairing-decided:%d:%s", p.UserID, p.Code)
	err := enqueue(ctx, d.Queue, OutboundPayload{Key: key, ChatID: p.ChatID, Text: stranger})
	for _, chat := range d.Owners {
		if err != nil {
			break
		}
		err = enqueue(ctx, d.Queue, OutboundPayload{Key: fmt.Sprintf("pairing-shown:%s:%d", p.Code, chat), ChatID: chat,
			PairingDecided: p.Code, PairingOutcome: pairingAsk(p) + "\n\n" + owner})
	}
	if err == nil && d.Chat != nil {
		_, _, err = d.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceSystem,
			Role: services.RoleAssistant, Content: owner, DedupeKey: key,
			Metadata: services.MessageMeta{Notice: "pairing_decided", PairingCode: p.Code}.Encode()})
	}
	if err != nil && d.Logger != nil {
		d.Logger.Error("pairing decided, but telling it failed", "user_id", p.UserID, "approved", approved, "err", err)
	}
}
