package app_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/repository"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/mcp"
)

// TestPairingIsAConversation: a stranger who writes to the bot gets a
// code, and the owner is told at once — in their Telegram chat with
// Approve / Deny buttons (an inline keyboard the strict Bot API server
// accepts) and in the owner's timeline (the page's card) — naming the
// stranger and the code. The owner's press approves through
// callback_query; the stranger is told, and their next message reaches
// the agent; the owner's timeline says it was approved. A second
// stranger denied with the button is told so and stays out. A paired
// stranger's /tools names none of the owner's MCP servers (the owner's
// does).
func TestPairingIsAConversation(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, func(o *app.Config, _ *llmtest.Server) {
		o.MCP = mcp.Config{"ownersecretsrv": {Command: "/nonexistent/mcp-server"}}
	})
	model.Enqueue(llmtest.Text("hi owner"))
	strict.Send(owner, "hello")
	if got := strict.WaitMessages(ownerTG, 1, 30*time.Second); len(got) != 1 || got[0].Text != "hi owner" {
		t.Fatalf("first answer on Telegram: %+v", got)
	}
	ctx := context.Background()
	anna := tgtest.User{ID: 4242, FirstName: "Anna", Username: "anna"}
	strict.Send(anna, "hi, may I talk to your agent?")
	got := strict.WaitMessages(anna.ID, 1, 30*time.Second)
	if len(got) != 1 || !strings.Contains(got[0].Text, "ask its owner to approve the code") {
		t.Fatalf("the stranger's code: %+v", got)
	}
	p, err := repository.NewTelegramStore(in.App.Pool()).PairingByUser(ctx, anna.ID)
	if err != nil {
		t.Fatal(err)
	}
	request := waitPairingAsk(t, strict, p.Code)
	if !strings.Contains(request.Text, "Anna @anna (Telegram id 4242) asks to talk to the agent") || !strings.Contains(request.Text, p.Code) {
		t.Fatalf("the owner's notice: %q", request.Text)
	}
	notice := waitTimeline(t, in, func(m services.Message) bool {
		meta, _ := services.DecodeMeta(m.Metadata)
		return meta.Notice == "pairing" && meta.PairingCode == p.Code
	})
	if !strings.Contains(notice.Content, "Anna @anna") {
		t.Fatalf("the timeline's notice: %q", notice.Content)
	}

	// A stranger's press decides nothing; the owner's approves.
	q := strict.Press(anna, ownerTG, request.MessageID, "pair:approve:"+p.Code)
	waitAnswer(t, strict, q, "Only the owner decides pairings")
	q = strict.Press(owner, ownerTG, request.MessageID, "pair:approve:"+p.Code)
	waitAnswer(t, strict, q, "Approved Anna @anna")
	got = strict.WaitMessages(anna.ID, 2, 30*time.Second)
	if len(got) != 2 || !strings.Contains(got[1].Text, "The owner approved you") {
		t.Fatalf("the stranger was not told: %+v", got)
	}
	// The request shows the decision without its buttons, edited once (by
	// the desk, which edits every owner chat's request wherever the
	// decision was made), not once more by the press.
	var shown tgtest.Sent
	if !poll(30*time.Second, func() bool {
		for _, m := range strict.Messages(ownerTG) {
			if m.MessageID == request.MessageID {
				shown = m
			}
		}
		return strings.Contains(shown.Text, "Approved: Anna @anna")
	}) {
		t.Fatalf("the request after the decision: %+v", shown)
	}
	if len(shown.Buttons) != 0 || shown.Edits != 1 {
		t.Fatalf("the request after the decision: %+v", shown)
	}
	waitTimeline(t, in, func(m services.Message) bool {
		meta, _ := services.DecodeMeta(m.Metadata)
		return meta.Notice == "pairing_decided" && meta.PairingCode == p.Code && strings.HasPrefix(m.Content, "Approved: `Anna @anna`")
	})

	// Paired: the stranger talks to the agent, and /tools hides the owner's servers.
	model.Enqueue(llmtest.Text("hello Anna"))
	strict.Send(anna, "thanks!")
	if got = strict.WaitMessages(anna.ID, 3, 30*time.Second); len(got) != 3 || got[2].Text != "hello Anna" {
		t.Fatalf("the paired stranger's answer: %+v", got)
	}
	strict.Send(anna, "/tools")
	got = strict.WaitMessages(anna.ID, 4, 30*time.Second)
	if len(got) != 4 || !strings.Contains(got[3].Text, "Built-in tools") || strings.Contains(got[3].Text, "ownersecretsrv") || strings.Contains(got[3].Text, "MCP") {
		t.Fatalf("a paired stranger's /tools: %+v", got[len(got)-1])
	}
	if reply := ask(t, in, "/tools"); !strings.Contains(reply, "ownersecretsrv") {
		t.Fatalf("the owner's /tools lacks the server: %q", reply)
	}

	// Denied.
	bob := tgtest.User{ID: 4343, FirstName: "Bob"}
	strict.Send(bob, "let me in")
	strict.WaitMessages(bob.ID, 1, 30*time.Second)
	pb, err := repository.NewTelegramStore(in.App.Pool()).PairingByUser(ctx, bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	request = waitPairingAsk(t, strict, pb.Code)
	q = strict.Press(owner, ownerTG, request.MessageID, "pair:deny:"+pb.Code)
	waitAnswer(t, strict, q, "Denied Bob")
	got = strict.WaitMessages(bob.ID, 2, 30*time.Second)
	if len(got) != 2 || !strings.Contains(got[1].Text, "did not approve") {
		t.Fatalf("the denied stranger was not told: %+v", got)
	}
	if pb, _ = repository.NewTelegramStore(in.App.Pool()).PairingByUser(ctx, bob.ID); pb.Approved() {
		t.Fatal("denied, yet approved")
	}
	q = strict.Press(owner, ownerTG, request.MessageID, "pair:approve:"+pb.Code)
	waitAnswer(t, strict, q, "no pending pairing")
}

// waitPairingAsk waits for the owner's Telegram notice of pairing code,
// with its Approve / Deny buttons.
func waitPairingAsk(t *testing.T, strict *tgtest.Strict, code string) tgtest.Sent {
	t.Helper()
	want := []string{"pair:approve:" + code, "pair:deny:" + code}
	var found tgtest.Sent
	if !poll(30*time.Second, func() bool {
		for _, m := range strict.Messages(ownerTG) {
			if slices.Equal(m.Buttons, want) {
				found = m
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no pairing request with buttons for the owner: %+v", strict.Messages(ownerTG))
	}
	return found
}

// waitTimeline waits for a row of the owner's timeline that ok accepts.
func waitTimeline(t *testing.T, in *apptest.Instance, ok func(services.Message) bool) services.Message {
	t.Helper()
	var page services.TimelinePage
	var found services.Message
	var err error
	if poll(30*time.Second, func() bool {
		if page, err = in.Chat.Timeline(context.Background(), services.DefaultTimeline, 0, 0, 200); err != nil {
			return true
		}
		for _, m := range page.Messages {
			if ok(m) {
				found = m
				return true
			}
		}
		return false
	}) && err == nil && found.ID != 0 {
		return found
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Messages {
		t.Logf("timeline: %d %s %s %s %.200q", m.ID, m.Role, m.Source, m.Metadata, m.Content)
	}
	t.Fatal("the row looked for is not in the owner's timeline")
	return services.Message{}
}

// TestPairingDecidedElsewhereShowsOnTelegram: a request denied on the page
// (POST /api/pairings/deny) or approved with `switchboard pair approve`
// (app.NewPairingDesk, as the command builds it) loses its Approve / Deny
// buttons in the owner's Telegram chat, edited by the strict Bot API
// server's rules to end with the decision; the command's decision also
// reaches the owner's timeline as the notice the page marks the card with.
func TestPairingDecidedElsewhereShowsOnTelegram(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, nil)
	// The owner has talked to the bot (Telegram lets a bot write only to
	// a chat that has).
	model.Enqueue(llmtest.Text("hi owner"))
	strict.Send(owner, "hello")
	strict.WaitMessages(ownerTG, 1, 30*time.Second)
	ctx := context.Background()
	store := repository.NewTelegramStore(in.App.Pool())
	anna := tgtest.User{ID: 7171, FirstName: "Anna"}
	bob := tgtest.User{ID: 7272, FirstName: "Bob"}
	codes := map[int64]string{}
	for _, u := range []tgtest.User{anna, bob} {
		strict.Send(u, "hello?")
		strict.WaitMessages(u.ID, 1, 30*time.Second)
		p, err := store.PairingByUser(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		codes[u.ID] = p.Code
	}
	request := func(code string) (tgtest.Sent, bool) {
		for _, m := range strict.Messages(ownerTG) {
			if strings.Contains(m.Text, "Code "+code) {
				return m, true
			}
		}
		return tgtest.Sent{}, false
	}
	if !poll(30*time.Second, func() bool {
		a, okA := request(codes[anna.ID])
		b, okB := request(codes[bob.ID])
		return okA && okB && a.Buttons != nil && b.Buttons != nil
	}) {
		t.Fatalf("the requests with buttons did not reach the owner: %+v", strict.Messages(ownerTG))
	}

	req, _ := http.NewRequest("POST", in.URL+"/api/pairings/deny", strings.NewReader(`{"code":"`+codes[anna.ID]+`"}`))
	req.Header.Set("Authorization", "Bearer "+in.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("deny on the page: %d", res.StatusCode)
	}
	desk, done, err := app.NewPairingDesk(ctx, in.App.Pool(), []int64{ownerTG}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := desk.ApprovePairing(ctx, codes[bob.ID]); err != nil {
		t.Fatal(err)
	}
	done()

	for _, c := range []struct {
		who  tgtest.User
		word string
	}{{anna, "Denied: "}, {bob, "Approved: "}} {
		if !poll(30*time.Second, func() bool {
			m, ok := request(codes[c.who.ID])
			return ok && m.Buttons == nil && m.Edits > 0 && strings.Contains(m.Text, c.word)
		}) {
			m, _ := request(codes[c.who.ID])
			t.Fatalf("%s's request in the owner's chat was not edited to show %q without buttons: %+v", c.who.FirstName, c.word, m)
		}
	}
	if got := strict.WaitMessages(bob.ID, 2, 30*time.Second); len(got) != 2 || !strings.Contains(got[1].Text, "The owner approved you") {
		t.Fatalf("Bob was not told: %+v", got)
	}
	var notices int
	if err := in.App.Pool().QueryRow(ctx, `SELECT count(*) FROM chat_messages WHERE metadata->>'notice' = 'pairing_decided'
		AND metadata->>'pairing_code' = $1 AND timeline_scope = 'global'`, codes[bob.ID]).Scan(&notices); err != nil || notices != 1 {
		t.Fatalf("the command's decision in the owner's timeline: %d notices, %v", notices, err)
	}
}

// TestPairCommandOnTelegram: the owner lists who waits with /pair in their
// Telegram chat (names and codes) and approves with /pair approve CODE:
// the stranger is told, the request with its buttons is edited to show the
// decision; a paired stranger's /pair decides nothing.
func TestPairCommandOnTelegram(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, nil)
	model.Enqueue(llmtest.Text("hi owner"))
	strict.Send(owner, "hello")
	strict.WaitMessages(ownerTG, 1, 30*time.Second)
	anna := tgtest.User{ID: 8181, FirstName: "Anna"}
	strict.Send(anna, "hello?")
	strict.WaitMessages(anna.ID, 1, 30*time.Second)
	p, err := repository.NewTelegramStore(in.App.Pool()).PairingByUser(context.Background(), anna.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The request with its buttons, then /pair's answer.
	strict.WaitMessages(ownerTG, 2, 30*time.Second)
	strict.Send(owner, "/pair")
	got := strict.WaitMessages(ownerTG, 3, 30*time.Second)
	if len(got) != 3 || !strings.Contains(got[2].Text, "Anna (Telegram id 8181): code "+p.Code) {
		t.Fatalf("/pair: %+v", got)
	}
	strict.Send(owner, "/pair approve "+strings.ToLower(p.Code))
	if got := strict.WaitMessages(anna.ID, 2, 30*time.Second); len(got) != 2 || !strings.Contains(got[1].Text, "The owner approved you") {
		t.Fatalf("Anna was not told: %+v", got)
	}
	if !poll(30*time.Second, func() bool {
		for _, m := range strict.Messages(ownerTG) {
			if strings.Contains(m.Text, "Code "+p.Code) {
				return m.Buttons == nil && strings.Contains(m.Text, "Approved: ")
			}
		}
		return false
	}) {
		t.Fatalf("the request was not edited: %+v", strict.Messages(ownerTG))
	}
	reply := func(n int, want string) {
		t.Helper()
		if !poll(30*time.Second, func() bool {
			for _, m := range strict.Messages(ownerTG)[n:] {
				if strings.Contains(m.Text, want) {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no %q: %+v", want, strict.Messages(ownerTG))
		}
	}
	reply(3, "Approved Anna (Telegram id 8181)")
	strict.Send(anna, "/pair approve ABCDEF")
	if got := strict.WaitMessages(anna.ID, 3, 30*time.Second); len(got) != 3 || got[2].Text != "Only the owner decides pairings." {
		t.Fatalf("a stranger's /pair: %+v", got)
	}
}
