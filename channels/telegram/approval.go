package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	if code, approve, ok := parsePairingDecision(q.Data); ok {
		return b.handlePairingPress(ctx, q, code, approve)
	}
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

// showDecided edits the request of approval p.Decided in p's chat to show
// how it was decided (p.Text, the decision's notice), without its buttons,
// whichever channel decided: a request decided on the page, the API or
// with /approve no longer offers buttons that would only say it was
// decided. Editing it again (a retried delivery, or after the owner's
// press edited it) is harmless. A request never delivered here, or one
// Telegram will not edit any more, is left alone; an error means the
// delivery should be tried again.
func (b *Bot) showDecided(ctx context.Context, p OutboundPayload) error {
	if b.opts.Approvals == nil {
		return nil
	}
	id, err := b.opts.Store.LastSentMessage(ctx, approvalKey(p.Decided, p.ChatID))
	if err != nil || id == 0 {
		return err
	}
	as, err := b.opts.Approvals.ListApprovals(ctx, services.ApprovalQuery{IDs: []int64{p.Decided}})
	if err != nil || len(as) == 0 {
		return err
	}
	var request, decision string
	if cs := Split(as[0].Request, MaxMessageLen); len(cs) > 0 {
		request = cs[len(cs)-1].HTML
	}
	if cs := Split(p.Text, MaxMessageLen); len(cs) > 0 {
		decision = cs[0].HTML
	}
	text := strings.TrimSpace(request + "\n\n" + decision)
	if len([]rune(visibleText(text))) > MaxMessageLen {
		text = decision
	}
	if strings.TrimSpace(visibleText(text)) == "" {
		return nil
	}
	if err := b.editRequest(ctx, p.ChatID, id, text); err != nil {
		return fmt.Errorf("telegram: show the decision of approval #%d: %w", p.Decided, err)
	}
	return nil
}

// editRequest replaces the text of message id in chat with html (Telegram
// HTML; plain text when Telegram cannot parse it) and removes its buttons.
// Telegram's refusals (too old to edit, deleted, not modified) are logged,
// not returned; a 429 is a *services.RetryAfterError and any other error
// means the delivery should be tried again.
func (b *Bot) editRequest(ctx context.Context, chat, id int64, html string) error {
	edit := func(plain bool) (outcome, error) {
		params := &bot.EditMessageTextParams{ChatID: chat, MessageID: int(id), Text: html, ParseMode: models.ParseModeHTML,
			LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: bot.True()}}
		if plain {
			params.Text, params.ParseMode = visibleText(html), ""
		}
		_, oc, err := b.call(ctx, func(ctx context.Context) (*models.Message, error) {
			_, err := b.api.EditMessageText(ctx, params)
			return nil, err
		})
		return oc, err
	}
	oc, err := edit(false)
	if oc == refused && errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "can't parse entities") {
		oc, err = edit(true)
	}
	switch {
	case oc == sent:
		return nil
	case oc != refused:
		return err
	}
	var tooMany *bot.TooManyRequestsError
	if errors.As(err, &tooMany) {
		return &services.RetryAfterError{Delay: time.Duration(max(tooMany.RetryAfter, 1)) * time.Second}
	}
	if !strings.Contains(err.Error(), "message is not modified") {
		b.log.Warn("telegram: a decided request was not edited", "chat_id", chat, "message_id", id, "err", err)
	}
	return nil
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
