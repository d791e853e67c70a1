package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestApprovalButtonsOnTelegram: a held call's request reaches the owner's
// Telegram chat with Approve / Deny buttons (an inline keyboard the strict
// Bot API server accepts); a stranger's press decides nothing; the owner's
// press approves it through callback_query, is answered
// (answerCallbackQuery) and the message is edited to show the decision,
// without its buttons; the call runs once and a second press is told it
// was already decided.
func TestApprovalButtonsOnTelegram(t *testing.T) {
	h := newHostile(t)
	in, strict, model := mediaInstance(t, func(o *app.Options, _ *llmtest.Server) {
		o.Fetch.Allow = []string{"127.0.0.1"}
	})
	// The owner has talked to the bot (Telegram lets a bot write only to
	// users who started it).
	model.Enqueue(llmtest.Text("hi owner"))
	strict.Send(owner, "hello")
	if got := strict.WaitMessages(ownerTG, 1, 30*time.Second); len(got) != 1 || got[0].Text != "hi owner" {
		t.Fatalf("first answer on Telegram: %+v", got)
	}
	a := heldRun(t, in, model, h)
	want := []string{fmt.Sprintf("approve:%d", a.ID), fmt.Sprintf("deny:%d", a.ID)}
	var request tgtest.Sent
	for deadline := time.Now().Add(30 * time.Second); request.MessageID == 0; {
		for _, m := range strict.Messages(ownerTG) {
			if slices.Equal(m.Buttons, want) && strings.Contains(m.Text, fmt.Sprintf("Approve #%d?", a.ID)) {
				request = m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no approval request with buttons on Telegram: %+v", strict.Messages(ownerTG))
		}
		time.Sleep(50 * time.Millisecond)
	}

	stranger := tgtest.User{ID: 999, FirstName: "Mallory"}
	q := strict.Press(stranger, ownerTG, request.MessageID, want[0])
	waitAnswer(t, strict, q, "Only the owner decides")
	if got, _ := in.Store.GetApproval(context.Background(), a.ID); got.State != services.ApprovalPending {
		t.Fatalf("a stranger's press decided it: %s", got.State)
	}

	model.Enqueue(llmtest.Text("sent after approval"))
	q = strict.Press(owner, ownerTG, request.MessageID, want[0])
	waitAnswer(t, strict, q, fmt.Sprintf("#%d approved", a.ID))
	waitFor(t, "the approved call", func() bool {
		got, _ := in.Store.GetApproval(context.Background(), a.ID)
		return got.State == services.ApprovalExecuted
	})
	for _, m := range strict.Messages(ownerTG) {
		if m.MessageID == request.MessageID && (m.Buttons != nil || !strings.Contains(m.Text, "approved")) {
			t.Fatalf("the request after the decision: %+v", m)
		}
	}
	if n := h.hits.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times", n)
	}
	q = strict.Press(owner, ownerTG, request.MessageID, want[1])
	waitAnswer(t, strict, q, "already decided")
}

// waitAnswer waits until callback query q was answered with a text
// containing want.
func waitAnswer(t *testing.T, strict *tgtest.Strict, q, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, ok := strict.Answer(q)
		if ok {
			if !strings.Contains(text, want) {
				t.Fatalf("press answered %q, want %q", text, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("press %s was never answered", q)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
