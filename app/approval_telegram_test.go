package app_test

import (
	"context"
	"fmt"
	"net/http"
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
	t.Parallel()
	h := newHostile(t)
	in, strict, model := mediaInstance(t, func(o *app.Config, _ *llmtest.Server) {
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
	if !poll(30*time.Second, func() bool {
		for _, m := range strict.Messages(ownerTG) {
			if slices.Equal(m.Buttons, want) && strings.Contains(m.Text, fmt.Sprintf("Approve #%d?", a.ID)) {
				request = m
			}
		}
		return request.MessageID != 0
	}) {
		t.Fatalf("no approval request with buttons on Telegram: %+v", strict.Messages(ownerTG))
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
	var text string
	var ok bool
	if !poll(30*time.Second, func() bool { text, ok = strict.Answer(q); return ok }) {
		t.Fatalf("press %s was never answered", q)
	}
	if !strings.Contains(text, want) {
		t.Fatalf("press answered %q, want %q", text, want)
	}
}

// TestApprovalDecidedElsewhereUpdatesTelegram: a request decided off
// Telegram (the REST API, /deny typed in the terminal client) is edited
// in the owner's Telegram chat to show the decision, and its buttons go
// (editMessageText on the strict Bot API server, which refuses what the
// real one refuses); the decision's notice follows as a message.
func TestApprovalDecidedElsewhereUpdatesTelegram(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	in, strict, model := mediaInstance(t, func(o *app.Config, _ *llmtest.Server) {
		o.Fetch.Allow = []string{"127.0.0.1"}
	})
	model.Enqueue(llmtest.Text("hi owner"))
	strict.Send(owner, "hello")
	if got := strict.WaitMessages(ownerTG, 1, 30*time.Second); len(got) != 1 || got[0].Text != "hi owner" {
		t.Fatalf("first answer on Telegram: %+v", got)
	}
	ctx := context.Background()
	for i, c := range []struct {
		how    string
		decide func(a services.Approval)
		want   string
	}{
		{"REST", func(a services.Approval) {
			req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/approvals/%d", in.URL, a.ID), strings.NewReader(`{"decision":"approve"}`))
			req.Header.Set("Authorization", "Bearer "+in.Token)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("POST /api/approvals/%d: %s", a.ID, res.Status)
			}
		}, "approved: fetch_url (via api)"},
		{"/deny in the terminal", func(a services.Approval) {
			if _, _, err := in.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceTUI,
				Content: fmt.Sprintf("/deny %d", a.ID)}); err != nil {
				t.Fatal(err)
			}
		}, "denied: fetch_url (via tui)"},
	} {
		t.Run(c.how, func(t *testing.T) {
			a := heldRun(t, in, model, h)
			request := waitRequest(t, strict, a)
			model.Enqueue(llmtest.Text(fmt.Sprintf("done %d", i)))
			c.decide(a)
			want := fmt.Sprintf("#%d %s.", a.ID, c.want)
			waitFor(t, "the request edited to show the decision", func() bool {
				for _, m := range strict.Messages(ownerTG) {
					if m.MessageID == request.MessageID {
						return m.Buttons == nil && strings.Contains(m.Text, want)
					}
				}
				return false
			})
			for _, m := range strict.Messages(ownerTG) {
				if m.MessageID == request.MessageID && (!strings.HasPrefix(m.Text, fmt.Sprintf("Approve #%d? fetch_url", a.ID)) || !strings.Contains(m.Text, "after reading "+h.page.URL) || m.Edits != 1) {
					t.Fatalf("the edited request: %+v", m)
				}
			}
			waitFor(t, "the decision's notice", func() bool {
				for _, m := range strict.Messages(ownerTG) {
					if m.MessageID > request.MessageID && m.Text == want {
						return true
					}
				}
				return false
			})
			// A press on the edited request's old button (a stale client)
			// is told it was decided.
			q := strict.Press(owner, ownerTG, request.MessageID, fmt.Sprintf("approve:%d", a.ID))
			waitAnswer(t, strict, q, "already decided")
		})
	}
	if n := h.hits.Load(); n != 1 {
		t.Fatalf("the calls ran %d times, want 1 (the approved one)", n)
	}
}

// waitRequest waits for approval a's request with its buttons in the
// owner's Telegram chat.
func waitRequest(t *testing.T, strict *tgtest.Strict, a services.Approval) tgtest.Sent {
	t.Helper()
	want := []string{fmt.Sprintf("approve:%d", a.ID), fmt.Sprintf("deny:%d", a.ID)}
	var request tgtest.Sent
	if !poll(30*time.Second, func() bool {
		for _, m := range strict.Messages(ownerTG) {
			if slices.Equal(m.Buttons, want) && strings.Contains(m.Text, fmt.Sprintf("Approve #%d?", a.ID)) {
				request = m
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no approval request with buttons on Telegram: %+v", strict.Messages(ownerTG))
	}
	return request
}
