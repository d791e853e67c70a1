package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/services"
)

// chunkStore keeps the sends of chunks as the database does: how many sends
// of a chunk began whose outcome is unknown.
type chunkStore struct {
	*fakes
	mu       sync.Mutex
	inFlight map[string]int
}

func (s *chunkStore) BeginChunk(_ context.Context, key string, i int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s/%d", key, i)
	s.inFlight[k]++
	return s.inFlight[k], nil
}

func (s *chunkStore) AbortChunk(_ context.Context, key string, i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s/%d", key, i)
	if s.inFlight[k] > 0 {
		s.inFlight[k]--
	}
	return nil
}

// newStrictBot is a Bot talking to a strict Bot API server in which user 1
// has written to the bot (message id 1).
func newStrictBot(t *testing.T, mod func(*Options)) (*Bot, *tgtest.Strict, *chunkStore) {
	t.Helper()
	srv := tgtest.StartStrict(t, testToken)
	srv.Send(tgtest.User{ID: 1, FirstName: "Owner"}, "question")
	store := &chunkStore{fakes: &fakes{keys: map[string]bool{}, pairings: map[int64]services.Pairing{}, sent: map[string]map[int]bool{}},
		inFlight: map[string]int{}}
	opts := Options{
		Token: testToken, APIURL: srv.URL, BotUsername: "switchbot", OwnerIDs: []int64{1},
		Chat: store, Store: store, Queue: store, RetryBackoff: 5 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	b, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, srv, store
}

// deliverLikeTheQueue calls Deliver until it succeeds, as the outbound queue
// retries a delivery that failed (without its waits).
func deliverLikeTheQueue(t *testing.T, b *Bot, p OutboundPayload) {
	t.Helper()
	payload, _ := json.Marshal(p)
	for attempt := 1; ; attempt++ {
		err := b.Deliver(t.Context(), payload)
		if err == nil {
			return
		}
		if attempt == 20 {
			t.Fatalf("delivery still failing after 20 attempts: %v", err)
		}
	}
}

func texts(msgs []tgtest.Sent) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text[:min(len(m.Text), 3)])
	}
	return out
}

// Two server errors on one chunk (Telegram's own 500, a proxy's 502 page)
// lose nothing: Telegram took nothing, so the chunk is sent again until it
// arrives, once, in its place, and nobody is told it was refused.
func TestDeliverRetriesServerErrors(t *testing.T) {
	t.Parallel()
	for name, faults := range map[string][]tgtest.Fault{
		"500 then a proxy's 502 page": {{Status: 500, Description: "Internal Server Error"}, {Page: tgtest.ProxyPage}},
		"two 502 pages":               {{Page: tgtest.ProxyPage}, {Page: tgtest.ProxyPage}},
		"two 500":                     {{Status: 500, Description: "Internal Server Error"}, {Status: 500, Description: "Internal Server Error"}},
		"503 and 429":                 {{Page: "<h1>503 Service Unavailable</h1>", Status: 503}, {Status: 429, RetryAfter: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, srv, store := newStrictBot(t, nil)
			// The second chunk's first two sends fail.
			srv.Script(func(method string, n int) tgtest.Fault {
				if method == "sendMessage" && (n == 2 || n == 3) {
					return faults[n-2]
				}
				return tgtest.Fault{}
			})
			deliverLikeTheQueue(t, b, OutboundPayload{Key: "reply:2", ChatID: 1, ReplyToMessageID: 1, Timeline: "global", ReplyTo: 1,
				Text: strings.Repeat("a", 4000) + "\n\n" + strings.Repeat("b", 4000) + "\n\n" + strings.Repeat("c", 100)})
			if got := texts(srv.Messages(1)); strings.Join(got, ",") != "aaa,bbb,ccc" {
				t.Fatalf("the chat shows %q, want the three chunks once each, in order", got)
			}
			if n := store.notices(); len(n) != 0 {
				t.Fatalf("the user was told: %+v", n)
			}
			if len(store.posts) != 0 {
				t.Fatalf("timeline notices: %+v", store.posts)
			}
		})
	}
}

// A sendMessage Telegram processes but answers late (40 s in the field;
// here scaled down) is waited for, not sent again: it shows once.
func TestDeliverWaitsForALateAnswer(t *testing.T) {
	t.Parallel()
	// Scaled by 1/20: a new call gets 1.5 s (30 s), a call on the wire 6 s
	// (2 min), and Telegram answers after 2 s (40 s).
	b, srv, store := newStrictBot(t, func(o *Options) { o.SendTimeout, o.AnswerTimeout = 1500*time.Millisecond, 6*time.Second })
	srv.Script(func(method string, n int) tgtest.Fault {
		if method == "sendMessage" && n == 1 {
			return tgtest.Fault{HoldAfter: 2 * time.Second}
		}
		return tgtest.Fault{}
	})
	deliverLikeTheQueue(t, b, OutboundPayload{Key: "reply:2", ChatID: 1, ReplyToMessageID: 1, Text: "the answer"})
	if got := srv.Messages(1); len(got) != 1 || got[0].Text != "the answer" {
		t.Fatalf("the chat shows %d messages: %+v", len(got), got)
	}
	if n := srv.Calls("sendMessage"); n != 1 {
		t.Fatalf("sendMessage called %d times", n)
	}
	if len(store.notices()) != 0 {
		t.Fatalf("notices: %+v", store.notices())
	}
}

// A chunk whose send had no answer at all (the connection dropped after
// Telegram took it, or Telegram held it past AnswerTimeout) is looked for in
// the chat before it is sent again: found, it is not sent twice; not there,
// it is sent again; either way it shows once, in order.
func TestDeliverLooksForAChunkWithoutAnswer(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		fault tgtest.Fault
		sends int
	}{
		"taken, connection dropped": {tgtest.Fault{Drop: true}, 3},
		"held past AnswerTimeout":   {tgtest.Fault{Hold: time.Minute}, 4},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, srv, store := newStrictBot(t, func(o *Options) { o.AnswerTimeout = 500 * time.Millisecond })
			srv.Script(func(method string, n int) tgtest.Fault {
				if method == "sendMessage" && n == 2 {
					return tc.fault
				}
				return tgtest.Fault{}
			})
			deliverLikeTheQueue(t, b, OutboundPayload{Key: "reply:2", ChatID: 1, ReplyToMessageID: 1,
				Text: strings.Repeat("a", 4000) + "\n\n" + strings.Repeat("b", 4000) + "\n\n" + strings.Repeat("c", 100)})
			msgs := srv.Messages(1)
			if got := texts(msgs); strings.Join(got, ",") != "aaa,bbb,ccc" {
				t.Fatalf("the chat shows %q, want the three chunks once each, in order", got)
			}
			for _, m := range msgs {
				if m.Edits != 0 {
					t.Fatalf("message %d was edited", m.MessageID)
				}
			}
			if n := srv.Calls("sendMessage"); n != tc.sends {
				t.Fatalf("sendMessage called %d times, want %d", n, tc.sends)
			}
			if srv.Calls("editMessageText") == 0 {
				t.Fatal("the chunk was not looked for")
			}
			if len(store.notices()) != 0 {
				t.Fatalf("notices: %+v", store.notices())
			}
		})
	}
}
