package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// approvalKeyboard is the Approve / Deny buttons under an approval request.
func approvalKeyboard(id int64) *models.InlineKeyboardMarkup {
	n := strconv.FormatInt(id, 10)
	return &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{
		{Text: "Approve", CallbackData: "approve:" + n},
		{Text: "Deny", CallbackData: "deny:" + n},
	}}}
}

// parseDecision reads a button's callback data ("approve:7", "deny:7").
func parseDecision(data string) (id int64, approve bool, ok bool) {
	verb, num, found := strings.Cut(data, ":")
	if !found || (verb != "approve" && verb != "deny") {
		return 0, false, false
	}
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil || id <= 0 {
		return 0, false, false
	}
	return id, verb == "approve", true
}

// handleCallback answers a press of an Approve / Deny button: only the
// owner decides; the decision goes through the same atomic transition as
// /approve on any channel (a second decision is told the first one), the
// press is answered (answerCallbackQuery) and the request's message is
// edited to show the outcome, without its buttons. An error means the
// update should be delivered again (the database is unavailable).
func (b *Bot) handleCallback(ctx context.Context, q *models.CallbackQuery) error {
	id, approve, ok := parseDecision(q.Data)
	var answer string
	switch {
	case !ok:
		answer = "This button is not one of mine."
	case !b.owners[q.From.ID]:
		answer = "Only the owner decides approvals."
	case b.opts.Approvals == nil:
		answer = "Approvals are not available here."
	default:
		a, err := b.opts.Approvals.DecideApproval(ctx, id, approve, string(services.SourceTelegram))
		switch {
		case err == nil:
			answer = fmt.Sprintf("#%d %s.", a.ID, decisionWord(approve))
			b.showDecision(ctx, q, answer)
		case services.IsKind(err, services.ECONFLICT), services.IsKind(err, services.ENOTFOUND):
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

func decisionWord(approve bool) string {
	if approve {
		return "approved"
	}
	return "denied"
}

// showDecision edits the pressed request to say how it was decided, and
// removes its buttons.
func (b *Bot) showDecision(ctx context.Context, q *models.CallbackQuery, outcome string) {
	m := q.Message.Message
	if m == nil {
		return
	}
	text := m.Text + "\n\n" + outcome
	if _, err := b.api.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: m.Chat.ID, MessageID: m.ID, Text: truncateRunes(text, MaxMessageLen)}); err != nil {
		b.log.Warn("telegram: show an approval's decision", "err", err)
	}
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
