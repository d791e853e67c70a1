package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

const testToken = "4242:test-token"

// fakes is the channel's collaborators, in memory.
type fakes struct {
	mu       sync.Mutex
	posts    []services.PostParams
	keys     map[string]bool
	out      []services.Outbound
	pairings map[int64]services.Pairing
	sent     map[string]map[int]bool
	hash     string
	offset   int64
}

func (f *fakes) Post(_ context.Context, p services.PostParams) (services.Message, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys[p.TimelineScope+p.DedupeKey] {
		return services.Message{}, false, nil
	}
	f.keys[p.TimelineScope+p.DedupeKey] = true
	f.posts = append(f.posts, p)
	return services.Message{ID: int64(len(f.posts)), TimelineScope: p.TimelineScope, Content: p.Content}, true, nil
}

// testTx stands for the caller's transaction where the fakes ignore it.
type testTx struct{ services.Tx }

func (f *fakes) EnqueueOutboundTx(ctx context.Context, _ services.Tx, o services.Outbound) error {
	return f.EnqueueOutbound(ctx, o)
}

func (f *fakes) EnqueueOutbound(_ context.Context, o services.Outbound) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, old := range f.out {
		if old.Key == o.Key {
			return nil
		}
	}
	f.out = append(f.out, o)
	return nil
}

func (f *fakes) LastUpdateID(context.Context, int64) (int64, error) { return f.offset, nil }
func (f *fakes) SetLastUpdateID(_ context.Context, _ int64, id int64) error {
	f.offset = id
	return nil
}
func (f *fakes) CommandsHash(context.Context, int64) (string, error) { return f.hash, nil }
func (f *fakes) SetCommandsHash(_ context.Context, _ int64, h string) error {
	f.hash = h
	return nil
}
func (f *fakes) PairingByUser(_ context.Context, id int64) (services.Pairing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pairings[id]
	if !ok {
		return services.Pairing{}, services.Errorf(services.ENOTFOUND, "no pairing")
	}
	return p, nil
}
func (f *fakes) RequestPairing(_ context.Context, p services.Pairing) (services.Pairing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.pairings[p.UserID]; ok {
		return old, nil
	}
	f.pairings[p.UserID] = p
	return p, nil
}
func (f *fakes) SentChunks(_ context.Context, key string) (map[int]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[int]bool{}
	for k, v := range f.sent[key] {
		m[k] = v
	}
	return m, nil
}
func (f *fakes) LastSentMessage(context.Context, string) (int64, error) { return 0, nil }
func (f *fakes) BeginChunk(context.Context, string, int) (int, error)   { return 1, nil }
func (f *fakes) AbortChunk(context.Context, string, int) error          { return nil }
func (f *fakes) MarkChunkSent(_ context.Context, key string, i int, _ int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent[key] == nil {
		f.sent[key] = map[int]bool{}
	}
	f.sent[key][i] = true
	return nil
}

func (f *fakes) notices() []OutboundPayload {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []OutboundPayload
	for _, o := range f.out {
		var p OutboundPayload
		_ = json.Unmarshal(o.Payload, &p)
		out = append(out, p)
	}
	return out
}

// fakeAPI is a Bot API answering with fn and recording sendMessage texts.
type fakeAPI struct {
	mu    sync.Mutex
	calls []string
	texts []string
	fn    func(method string, n int) (status int, body string)
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	_ = r.ParseMultipartForm(1 << 20)
	a.mu.Lock()
	a.calls = append(a.calls, method)
	n := 0
	for _, c := range a.calls {
		if c == method {
			n++
		}
	}
	status, body := 200, `{"ok":true,"result":true}`
	if a.fn != nil {
		status, body = a.fn(method, n)
	}
	if method == "sendMessage" && status == 200 {
		a.texts = append(a.texts, r.FormValue("text"))
		body = fmt.Sprintf(`{"ok":true,"result":{"message_id":%d,"date":0,"chat":{"id":1,"type":"private"}}}`, len(a.texts))
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func setup(t *testing.T, mod func(*options)) (*Bot, *fakes, *fakeAPI) {
	t.Helper()
	f := &fakes{keys: map[string]bool{}, pairings: map[int64]services.Pairing{}, sent: map[string]map[int]bool{}}
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	opts := options{
		Config: Config{Token: testToken, APIURL: srv.URL, BotUsername: "switchbot", OwnerIDs: []int64{1}, GroupIDs: []int64{-100}},
		Deps:   Deps{Chat: f, Store: f, Queue: f},
	}
	if mod != nil {
		mod(&opts)
	}
	b, err := New(t.Context(), opts.Deps, opts.Config)
	if err != nil {
		t.Fatal(err)
	}
	return b, f, api
}

func update(from int64, text string) *models.Update {
	return &models.Update{ID: 1, Message: &models.Message{
		ID: 10, Text: text, Date: 1,
		From: &models.User{ID: from, FirstName: "Ann"},
		Chat: models.Chat{ID: from, Type: models.ChatTypePrivate},
	}}
}

func TestPhotoWithoutCaptionIsNotSupportedYet(t *testing.T) {
	t.Parallel()
	b, f, _ := setup(t, nil)
	u := update(1, "")
	u.Message.Photo = []models.PhotoSize{{FileID: "x", Width: 1, Height: 1}}
	if err := b.HandleUpdate(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	if len(f.posts) != 0 {
		t.Fatalf("a photo reached the agent: %+v", f.posts)
	}
	n := f.notices()
	if len(n) != 1 || !strings.Contains(n[0].Text, "photo messages are not supported yet") || n[0].ChatID != 1 || n[0].ReplyToMessageID != 10 {
		t.Fatalf("notice: %+v", n)
	}
	// A sticker too; a service message (nothing to show) is ignored silently.
	u = update(1, "")
	u.Message.ID = 11
	u.Message.Sticker = &models.Sticker{FileID: "s"}
	_ = b.HandleUpdate(t.Context(), u)
	u = update(1, "")
	u.Message.ID = 12
	_ = b.HandleUpdate(t.Context(), u)
	if n := f.notices(); len(n) != 2 || !strings.Contains(n[1].Text, "sticker") {
		t.Fatalf("notices: %+v", n)
	}
}

func TestCaptionEditAndMetadata(t *testing.T) {
	t.Parallel()
	b, f, _ := setup(t, nil)
	u := update(1, "")
	u.Message.Caption = "look at this"
	u.Message.Photo = []models.PhotoSize{{FileID: "x"}}
	u.Message.ReplyToMessage = &models.Message{ID: 7}
	if err := b.HandleUpdate(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	e := &models.Update{ID: 2, EditedMessage: &models.Message{ID: 10, Text: "fixed text", EditDate: 99,
		From: &models.User{ID: 1}, Chat: models.Chat{ID: 1, Type: models.ChatTypePrivate}}}
	if err := b.HandleUpdate(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	_ = b.HandleUpdate(t.Context(), e) // redelivered
	// A second edit of the same message within the same second (same
	// edit_date) is a new update: it is stored too.
	e2 := &models.Update{ID: 3, EditedMessage: &models.Message{ID: 10, Text: "fixed text again", EditDate: 99,
		From: &models.User{ID: 1}, Chat: models.Chat{ID: 1, Type: models.ChatTypePrivate}}}
	if err := b.HandleUpdate(t.Context(), e2); err != nil {
		t.Fatal(err)
	}
	if len(f.posts) != 3 {
		t.Fatalf("posts: %+v", f.posts)
	}
	if p := f.posts[2]; p.Content != "(edited) fixed text again" || p.DedupeKey != "tg:1:10:edit:u3" {
		t.Fatalf("second edit in the same second: %+v", p)
	}
	p := f.posts[0]
	var meta map[string]any
	_ = json.Unmarshal(p.Metadata, &meta)
	if p.Content != "look at this" || p.TimelineScope != "global" || p.Source != "telegram" || p.DedupeKey != "tg:1:10" ||
		meta["caption"] != true || meta["media"] != "photo" || meta["reply_to_message_id"] != float64(7) || meta["chat_id"] != float64(1) {
		t.Fatalf("caption post: %+v %s", p, p.Metadata)
	}
	if p := f.posts[1]; p.Content != "(edited) fixed text" || p.DedupeKey != "tg:1:10:edit:u2" {
		t.Fatalf("edit post: %+v", p)
	}
}

func TestCommandsKeepTheirMarker(t *testing.T) {
	t.Parallel()
	b, f, _ := setup(t, nil)
	_ = b.HandleUpdate(t.Context(), update(1, "/status@switchbot"))
	if len(f.posts) != 1 || !strings.Contains(string(f.posts[0].Metadata), `"command":"status"`) {
		t.Fatalf("posts: %+v", f.posts)
	}
}

func TestGroupsNeedAMention(t *testing.T) {
	t.Parallel()
	b, f, _ := setup(t, nil)
	in := func(chatID int64, text string) {
		u := update(1, text)
		u.Message.ID++
		u.Message.Chat = models.Chat{ID: chatID, Type: models.ChatTypeSupergroup}
		_ = b.HandleUpdate(t.Context(), u)
	}
	in(-100, "just chatting")
	in(-200, "@switchbot hi from an unknown group")
	in(-100, "@SwitchBot what time is it?")
	if len(f.posts) != 1 || f.posts[0].Content != "what time is it?" {
		t.Fatalf("posts: %+v", f.posts)
	}
}

func TestPolicies(t *testing.T) {
	t.Parallel()
	t.Run("allowlist", func(t *testing.T) {
		b, f, _ := setup(t, func(o *options) { o.Policy = PolicyAllowlist; o.AllowedIDs = []int64{5} })
		_ = b.HandleUpdate(t.Context(), update(9, "hi"))
		_ = b.HandleUpdate(t.Context(), update(5, "hi"))
		if len(f.posts) != 1 || f.posts[0].TimelineScope != "tg:5" || len(f.notices()) != 0 {
			t.Fatalf("posts %+v notices %+v", f.posts, f.notices())
		}
	})
	t.Run("open", func(t *testing.T) {
		b, f, _ := setup(t, func(o *options) { o.Policy = PolicyOpen })
		_ = b.HandleUpdate(t.Context(), update(9, "hi"))
		if len(f.posts) != 1 || f.posts[0].TimelineScope != "tg:9" {
			t.Fatalf("posts %+v", f.posts)
		}
	})
	t.Run("pairing", func(t *testing.T) {
		b, f, _ := setup(t, nil)
		_ = b.HandleUpdate(t.Context(), update(9, "hi"))
		// A stranger who keeps writing gets one reply per code, not one
		// per message.
		for i := range 20 {
			u := update(9, "hello?")
			u.Message.ID = 11 + i
			_ = b.HandleUpdate(t.Context(), u)
		}
		// The owner is told once too: a notice in the owner's timeline
		// and a message with Approve / Deny buttons in the owner's chat.
		var n, asks []OutboundPayload
		for _, o := range f.notices() {
			if o.ChatID == 9 {
				n = append(n, o)
			} else {
				asks = append(asks, o)
			}
		}
		code := f.pairings[9].Code
		if len(f.posts) != 1 || f.posts[0].TimelineScope != services.DefaultTimeline || f.posts[0].Source != services.SourceSystem ||
			!strings.Contains(f.posts[0].Content, "`Ann` (Telegram id 9) asks to talk to the agent") || len(n) != 1 ||
			len(asks) != 1 || asks[0].ChatID != 1 || asks[0].PairingCode != code || !strings.Contains(asks[0].Text, code) {
			t.Fatalf("posts %+v notices %+v owner %+v", f.posts, n, asks)
		}
		f.posts = nil
		if len(code) != 6 || !strings.Contains(n[0].Text, code) {
			t.Fatalf("code %q not in %+v", code, n)
		}
		p := f.pairings[9]
		now := time.Now()
		p.ApprovedAt = &now
		f.pairings[9] = p
		u := update(9, "hello?")
		u.Message.ID = 100
		_ = b.HandleUpdate(t.Context(), u)
		if len(f.posts) != 1 || f.posts[0].TimelineScope != "tg:9" {
			t.Fatalf("after approval: %+v", f.posts)
		}
	})
}

func TestRouterEnqueuesOneReply(t *testing.T) {
	t.Parallel()
	f := &fakes{}
	r := Router{Queue: f}
	to := services.Message{ID: 3, TimelineScope: "global", Meta: services.MessageMeta{TelegramMeta: services.TelegramMeta{ChatID: 77, MessageID: 5}}}
	for range 2 {
		if err := r.RouteReplyTx(t.Context(), testTx{}, to, services.Message{ID: 8, Content: "answer"}); err != nil {
			t.Fatal(err)
		}
	}
	n := f.notices()
	if len(n) != 1 || f.out[0].Channel != "telegram" || f.out[0].Key != "reply:8" ||
		!reflect.DeepEqual(n[0], OutboundPayload{Key: "reply:8", ChatID: 77, ReplyToMessageID: 5, Text: "answer", Timeline: "global", ReplyTo: 3}) {
		t.Fatalf("outbound: %+v %+v", f.out, n)
	}
	if err := r.RouteReplyTx(t.Context(), testTx{}, services.Message{ID: 4}, services.Message{ID: 9}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("no chat id: %v", err)
	}
}

func TestDeliverHonoursRetryAfterAndNeverResends(t *testing.T) {
	t.Parallel()
	b, _, api := setup(t, nil)
	// The second chunk is refused once with 429.
	api.fn = func(method string, n int) (int, string) {
		if method == "sendMessage" && n == 2 {
			return 429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1","parameters":{"retry_after":1}}`
		}
		return 200, ""
	}
	text := strings.Repeat("a", 4000) + "\n\n" + strings.Repeat("b", 4000) + "\n\n   \n\n" + strings.Repeat("c", 100)
	payload, _ := json.Marshal(OutboundPayload{Key: "reply:1", ChatID: 1, ReplyToMessageID: 3, Text: text})
	err := b.Deliver(t.Context(), payload)
	var ra *services.RetryAfterError
	if !errors.As(err, &ra) || ra.Delay != time.Second {
		t.Fatalf("want RetryAfterError 1s, got %v", err)
	}
	if err := b.Deliver(t.Context(), payload); err != nil {
		t.Fatal(err)
	}
	if err := b.Deliver(t.Context(), payload); err != nil { // a stray retry sends nothing
		t.Fatal(err)
	}
	if len(api.texts) != 3 || !strings.HasPrefix(api.texts[0], "aaa") || !strings.HasPrefix(api.texts[1], "bbb") || !strings.HasPrefix(api.texts[2], "ccc") {
		t.Fatalf("sent %d chunks: %q", len(api.texts), api.texts)
	}
}

// A chunk Telegram cannot parse as HTML is sent again as plain text; one it
// refuses even so is reported in the chat and on the timeline, and the rest
// of the answer is still delivered.
func TestDeliverFallsBackToPlainTextAndReportsWhatItCannotSend(t *testing.T) {
	t.Parallel()
	b, f, api := setup(t, nil)
	const cantParse = `{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: unsupported start tag"}`
	api.fn = func(method string, n int) (int, string) {
		// sendMessage calls: 1 chunk a; 2 chunk b as HTML (refused), 3 chunk b
		// as text; 4 chunk c as HTML (refused), 5 chunk c as text (refused);
		// 6 chunk d.
		if method == "sendMessage" && (n == 2 || n == 4 || n == 5) {
			return 400, cantParse
		}
		return 200, ""
	}
	text := strings.Repeat("a", 4000) + "\n\n" + strings.Repeat("b", 4000) + "\n\n" + strings.Repeat("c", 4000) + "\n\n" + strings.Repeat("d", 100)
	payload, _ := json.Marshal(OutboundPayload{Key: "reply:7", ChatID: 1, Text: text, Timeline: "global", ReplyTo: 6})
	if err := b.Deliver(t.Context(), payload); err != nil {
		t.Fatal(err)
	}
	if len(api.texts) != 3 || !strings.HasPrefix(api.texts[0], "aaa") || !strings.HasPrefix(api.texts[1], "bbb") || !strings.HasPrefix(api.texts[2], "ddd") {
		t.Fatalf("sent %d chunks: %.20q", len(api.texts), api.texts)
	}
	n := f.notices()
	if len(n) != 1 || !strings.Contains(n[0].Text, "Part 3 of this answer could not be delivered") {
		t.Fatalf("notices in the chat: %+v", n)
	}
	if len(f.posts) != 1 || f.posts[0].TimelineScope != "global" || f.posts[0].Source != services.SourceSystem ||
		!strings.Contains(f.posts[0].Content, "Part 3") {
		t.Fatalf("timeline posts: %+v", f.posts)
	}
	if err := b.Deliver(t.Context(), payload); err != nil || len(api.texts) != 3 { // a retry sends nothing again
		t.Fatalf("retry: %v, %d sent", err, len(api.texts))
	}
}

// A sendMessage that Telegram holds fails after AnswerTimeout (the delivery
// is retried) instead of holding the chat's deliveries indefinitely.
func TestDeliverBoundsEachCall(t *testing.T) {
	t.Parallel()
	b, _, api := setup(t, func(o *options) { o.SendTimeout, o.AnswerTimeout = 200*time.Millisecond, 300*time.Millisecond })
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server closes (cleanups run last first)
	api.fn = func(method string, n int) (int, string) {
		if method == "sendMessage" {
			<-release
		}
		return 200, ""
	}
	payload, _ := json.Marshal(OutboundPayload{Key: "reply:9", ChatID: 1, Text: "hello"})
	done := make(chan error, 1)
	go func() { done <- b.Deliver(t.Context(), payload) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a held sendMessage returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deliver still waits on a held sendMessage after 10 s (AnswerTimeout 300 ms)")
	}
}

func TestSyncCommandsOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	b, f, api := setup(t, nil)
	api.fn = func(method string, n int) (int, string) {
		if method == "setMyCommands" && n == 1 {
			return 404, `{"ok":false,"error_code":404,"description":"Not Found"}`
		}
		return 200, `{"ok":true,"result":true}`
	}
	if _, err := b.SyncCommands(t.Context()); err == nil || f.hash != "" {
		t.Fatalf("a failed call must not store the hash: %v %q", err, f.hash)
	}
	for i, want := range []bool{true, false} {
		called, err := b.SyncCommands(t.Context())
		if err != nil || called != want {
			t.Fatalf("sync %d: called %v err %v", i, called, err)
		}
	}
}

func TestWebhookSecret(t *testing.T) {
	t.Parallel()
	b, f, _ := setup(t, nil)
	h := b.WebhookHandler("s3cret")
	body, _ := json.Marshal(update(1, "hi"))
	for _, tc := range []struct {
		secret string
		want   int
	}{{"", 401}, {"wrong", 403}, {"s3cret", 200}, {"s3cret", 200}} {
		req := httptest.NewRequest("POST", "/telegram/webhook", strings.NewReader(string(body)))
		if tc.secret != "" {
			req.Header.Set(SecretHeader, tc.secret)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Fatalf("secret %q: %d, want %d", tc.secret, rec.Code, tc.want)
		}
	}
	if len(f.posts) != 1 {
		t.Fatalf("posts: %+v", f.posts)
	}
}

func TestPairingCodes(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 200 {
		c := NewPairingCode()
		if len(c) != 6 || strings.Trim(c, pairingAlphabet) != "" {
			t.Fatalf("bad code %q", c)
		}
		seen[c] = true
	}
	if len(seen) < 190 {
		t.Fatalf("codes repeat too often: %d distinct of 200", len(seen))
	}
}

// chatActions answers the Bot API in memory and counts sendChatAction
// calls, so a test can run the typing indicator inside a synctest bubble.
type chatActions struct {
	mu    sync.Mutex
	calls int
}

func (c *chatActions) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	if strings.HasSuffix(r.URL.Path, "/sendChatAction") {
		c.mu.Lock()
		c.calls++
		c.mu.Unlock()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"ok":true,"result":true}`)), Request: r}, nil
}

func (c *chatActions) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// TestTypingWhileRunWorks: "typing…" is sent at once for a Telegram run
// (not for a web one), repeated every interval while the run works, and
// not after it ends. The clock is synctest's and the Bot API answers in
// memory, so the counts are exact on any machine.
func TestTypingWhileRunWorks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &chatActions{}
		b, err := NewTyping(testToken, "http://api.telegram.invalid", &http.Client{Transport: api}, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		trigger := services.Message{Source: "telegram", Meta: services.MessageMeta{TelegramMeta: services.TelegramMeta{ChatID: 1}}}
		b.RunStarted(t.Context(), services.Run{ID: 1}, services.Message{Source: "web"})
		b.RunStarted(t.Context(), services.Run{ID: 2}, trigger)
		synctest.Wait()
		if n := api.count(); n != 1 {
			t.Fatalf("typing sent %d times at the run's start, want 1", n)
		}
		time.Sleep(40 * time.Millisecond) // synctest bubble: fake time, two intervals pass
		synctest.Wait()
		if n := api.count(); n != 3 {
			t.Fatalf("typing sent %d times after two intervals, want 3", n)
		}
		b.RunFinished(t.Context(), services.Run{ID: 2}, trigger)
		synctest.Wait()
		n := api.count()
		time.Sleep(100 * time.Millisecond) // synctest bubble: fake time, five intervals pass
		synctest.Wait()
		if m := api.count(); m != n {
			t.Fatalf("typing went on after the run: %d → %d", n, m)
		}
	})
}

func TestMentionsMatchWholeUsernames(t *testing.T) {
	t.Parallel()
	b, f, _ := setup(t, nil)
	in := func(text string) {
		u := update(1, text)
		u.Message.Chat = models.Chat{ID: -100, Type: models.ChatTypeSupergroup}
		_ = b.HandleUpdate(t.Context(), u)
	}
	in("@switchbotnet please ignore this") // another bot whose name starts like ours
	in("ask @switchbot_fan instead")
	in("hello @SwitchBot, what time is it?")
	if len(f.posts) != 1 || f.posts[0].Content != "hello , what time is it?" {
		t.Fatalf("posts: %+v", f.posts)
	}
}

// A getMe that fails at start does not lose group mentions: the update is
// refused (so Telegram delivers it again) until getMe answers, then stored.
func TestGroupMentionsWaitForGetMe(t *testing.T) {
	t.Parallel()
	f := &fakes{keys: map[string]bool{}, pairings: map[int64]services.Pairing{}, sent: map[string]map[int]bool{}}
	var fail atomic.Bool
	fail.Store(true)
	api := &fakeAPI{fn: func(method string, n int) (int, string) {
		if method == "getMe" {
			if fail.Load() {
				return 502, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`
			}
			return 200, `{"ok":true,"result":{"id":1234,"is_bot":true,"first_name":"Switch","username":"switchbot"}}`
		}
		return 200, `{"ok":true,"result":true}`
	}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	b, err := New(t.Context(), Deps{Chat: f, Store: f, Queue: f},
		Config{Token: testToken, APIURL: srv.URL, OwnerIDs: []int64{1}, GroupIDs: []int64{-100}})
	if err != nil {
		t.Fatal(err)
	}
	u := update(1, "@switchbot are you there?")
	u.Message.Chat = models.Chat{ID: -100, Type: models.ChatTypeSupergroup}
	if err := b.HandleUpdate(t.Context(), u); err == nil || len(f.posts) != 0 {
		t.Fatalf("with getMe failing: err %v, posts %+v; want an error (update left unconfirmed) and nothing stored", err, f.posts)
	}
	fail.Store(false)
	b.meMu.Lock()
	b.meTried = time.Time{} // the retry interval has passed
	b.meMu.Unlock()
	if err := b.HandleUpdate(t.Context(), u); err != nil || len(f.posts) != 1 || f.posts[0].Content != "are you there?" {
		t.Fatalf("after getMe answers: err %v, posts %+v", err, f.posts)
	}
}
