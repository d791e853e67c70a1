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
	chunkMu  sync.Mutex
	inFlight map[string]int
}

func (s *chunkStore) BeginChunk(_ context.Context, key string, i int) (int, error) {
	s.chunkMu.Lock()
	defer s.chunkMu.Unlock()
	k := fmt.Sprintf("%s/%d", key, i)
	s.inFlight[k]++
	return s.inFlight[k], nil
}

func (s *chunkStore) AbortChunk(_ context.Context, key string, i int) error {
	s.chunkMu.Lock()
	defer s.chunkMu.Unlock()
	k := fmt.Sprintf("%s/%d", key, i)
	if s.inFlight[k] > 0 {
		s.inFlight[k]--
	}
	return nil
}

// newStrictBot is a Bot talking to a strict Bot API server in which user 1
// has written to the bot (message id 1).
func newStrictBot(t *testing.T, mod func(*options)) (*Bot, *tgtest.Strict, *chunkStore) {
	t.Helper()
	srv := tgtest.StartStrict(t, testToken)
	srv.Send(tgtest.User{ID: 1, FirstName: "Owner"}, "question")
	store := &chunkStore{fakes: &fakes{keys: map[string]bool{}, pairings: map[int64]services.Pairing{}, sent: map[string]map[int]bool{}},
		inFlight: map[string]int{}}
	opts := options{
		Config: Config{Token: testToken, APIURL: srv.URL, BotUsername: "switchbot", OwnerIDs: []int64{1}, RetryBackoff: 5 * time.Millisecond},
		Deps:   Deps{Chat: store, Store: store, Queue: store},
	}
	if mod != nil {
		mod(&opts)
	}
	b, err := New(t.Context(), opts.Deps, opts.Config)
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
	b, srv, store := newStrictBot(t, func(o *options) { o.SendTimeout, o.AnswerTimeout = 1500*time.Millisecond, 6*time.Second })
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
			b, srv, store := newStrictBot(t, func(o *options) { o.AnswerTimeout = 500 * time.Millisecond })
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

// memMedia keeps saved files in memory.
type memMedia struct {
	mu    sync.Mutex
	saved []services.Upload
}

func (m *memMedia) Save(_ context.Context, _ string, u services.Upload) (services.Attachment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saved = append(m.saved, u)
	return services.Attachment{Name: u.Name, MIMEType: u.MIMEType, Size: int64(len(u.Data))}, nil
}
func (m *memMedia) Read(context.Context, string, string) ([]byte, error) {
	return nil, services.Errorf(services.ENOTFOUND, "no file")
}
func (m *memMedia) MaxBytes() int64 { return 0 }

// A photo Telegram cannot hand over (getFile failing, a download failing)
// is tried a few times, then given up: its sender hears why, and the
// messages after it — /stop included — are not held behind it.
func TestPollingGivesUpAPhotoItCannotDownload(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		fault  func(method string) tgtest.Fault
		reason string
	}{
		"getFile 404": {func(m string) tgtest.Fault {
			return onlyFor(m, "getFile", tgtest.Fault{Status: 404, Description: "Not Found"})
		}, "Telegram answered getFile with HTTP 404"},
		"getFile 500": {func(m string) tgtest.Fault {
			return onlyFor(m, "getFile", tgtest.Fault{Status: 500, Description: "Internal Server Error"})
		}, "Telegram answered getFile with HTTP 500"},
		"getFile 502":  {func(m string) tgtest.Fault { return onlyFor(m, "getFile", tgtest.Fault{Page: tgtest.ProxyPage}) }, "Telegram answered getFile with HTTP 502"},
		"download 502": {func(m string) tgtest.Fault { return onlyFor(m, "file", tgtest.Fault{Page: tgtest.ProxyPage}) }, "the download answered HTTP 502"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			media := &memMedia{}
			b, srv, store := newStrictBot(t, func(o *options) {
				o.Leases, o.PollTimeout, o.Media = grantAll{}, time.Second, media
			})
			srv.Script(func(method string, _ int) tgtest.Fault { return tc.fault(method) })
			owner := tgtest.User{ID: 1, FirstName: "Owner"}
			srv.SendMedia(owner, tgtest.Photo, "", tgtest.File{Data: []byte("\xff\xd8 not much of a jpeg"), Width: 90, Height: 90})
			srv.Send(owner, "/stop")
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { b.RunPolling(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			// The assertions below say what is missing if this gives up.
			poll(30*time.Second, func() bool { store.mu.Lock(); defer store.mu.Unlock(); return len(store.posts) > 1 })
			store.mu.Lock()
			posts := append([]services.PostParams(nil), store.posts...)
			store.mu.Unlock()
			if len(posts) != 2 || posts[0].Content != "question" || posts[1].Content != "/stop" {
				t.Fatalf("stored %d messages; want the question and /stop, after the photo was given up", len(posts))
			}
			n := store.notices()
			want := "I could not download this photo (" + tc.reason + "). Please send it again."
			if len(n) != 1 || n[0].Text != want || n[0].ReplyToMessageID != 2 {
				t.Fatalf("the sender was told %+v, want %q in reply to the photo", n, want)
			}
			if calls := srv.Calls("getFile"); calls < 2 || calls > maxUpdateAttempts {
				t.Fatalf("getFile called %d times, want a few retries", calls)
			}
			if len(media.saved) != 0 {
				t.Fatalf("saved %d files", len(media.saved))
			}
		})
	}
}

// onlyFor is f for method want, the zero Fault for others.
func onlyFor(method, want string, f tgtest.Fault) tgtest.Fault {
	if method == want {
		return f
	}
	return tgtest.Fault{}
}

// failingPoster refuses to store one text, as if it broke the store.
type failingPoster struct {
	*chunkStore
	poison string
}

func (p failingPoster) Post(ctx context.Context, pp services.PostParams) (services.Message, bool, error) {
	if pp.Content == p.poison {
		return services.Message{}, false, fmt.Errorf("store message: %w", context.DeadlineExceeded)
	}
	return p.chunkStore.Post(ctx, pp)
}

// Any update whose handling keeps failing is given up after a few attempts,
// its sender told; the updates after it go on.
func TestPollingGivesUpAnUpdateThatKeepsFailing(t *testing.T) {
	t.Parallel()
	b, srv, store := newStrictBot(t, func(o *options) { o.Leases, o.PollTimeout = grantAll{}, time.Second })
	b.opts.Chat = failingPoster{store, "poison"}
	owner := tgtest.User{ID: 1, FirstName: "Owner"}
	srv.Send(owner, "poison")
	srv.Send(owner, "/stop")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { b.RunPolling(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The assertions below say what is missing if this gives up.
	poll(30*time.Second, func() bool { store.mu.Lock(); defer store.mu.Unlock(); return len(store.posts) > 1 })
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.posts) != 2 || store.posts[1].Content != "/stop" {
		t.Fatalf("stored %d messages; want the question and /stop", len(store.posts))
	}
	var told []string
	for _, o := range store.out {
		var p OutboundPayload
		_ = json.Unmarshal(o.Payload, &p)
		told = append(told, p.Text)
	}
	if len(told) != 1 || !strings.HasPrefix(told[0], "I could not take this message") {
		t.Fatalf("the sender was told %q", told)
	}
}
