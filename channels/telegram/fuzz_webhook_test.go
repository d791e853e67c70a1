package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// FuzzWebhookUpdate feeds arbitrary bodies to the webhook handler (with the
// right secret): it never panics, answers 200 or 400 (the fakes never fail,
// so a 500 would be the channel's own fault), and nothing from a sender
// other than the owner (user 1) is stored: under the default pairing
// policy, with no approvals, strangers never reach the agent.
func FuzzWebhookUpdate(f *testing.F) {
	fk := &fakes{keys: map[string]bool{}, pairings: map[int64]services.Pairing{}, sent: map[string]map[int]bool{}}
	srv := httptest.NewServer(&fakeAPI{})
	f.Cleanup(srv.Close)
	b, err := New(context.Background(), Deps{Chat: fk, Store: fk, Queue: fk},
		Config{Token: testToken, APIURL: srv.URL, BotUsername: "switchbot", OwnerIDs: []int64{1}, GroupIDs: []int64{-100}})
	if err != nil {
		f.Fatal(err)
	}
	h := b.WebhookHandler("s3cret")
	for _, u := range []*models.Update{update(1, "hi"), update(2, "let me in"), update(1, "/new"), update(1, "")} {
		body, _ := json.Marshal(u)
		f.Add(body)
	}
	f.Add([]byte(`{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":-100,"type":"supergroup"},"from":{"id":3,"first_name":"X"},"text":"@switchbot hello"}}`))
	f.Add([]byte(`{"update_id":6,"edited_message":{"message_id":1,"date":1,"chat":{"id":1,"type":"private"},"from":{"id":1,"first_name":"O"},"text":"edited"}}`))
	f.Add([]byte(`{"update_id":7,"message":{"message_id":1,"date":1,"chat":{"id":1,"type":"private"},"text":"no sender"}}`))
	f.Add([]byte(`{"update_id":8,"message":{"message_id":1,"date":1,"chat":{"id":1,"type":"private"},"from":{"id":1},"caption":"photo","photo":[{"file_id":"x","width":1,"height":1}]}}`))
	f.Add([]byte(`{"update_id":9,"callback_query":{"id":"1","from":{"id":2},"data":"x"}}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"update_id":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fk.mu.Lock()
		before := len(fk.posts)
		fk.mu.Unlock()
		req := httptest.NewRequest("POST", "/telegram/webhook", bytes.NewReader(body))
		req.Header.Set(SecretHeader, "s3cret")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
		fk.mu.Lock()
		var posts []services.PostParams
		for _, p := range fk.posts[before:] {
			// A stranger's request is announced to the owner: a system
			// notice, not the stranger's text.
			if meta, _ := services.DecodeMeta(p.Metadata); p.Source == services.SourceSystem && meta.Notice == "pairing" {
				continue
			}
			posts = append(posts, p)
		}
		fk.mu.Unlock()
		if len(posts) == 0 {
			return
		}
		var u models.Update
		if err := json.Unmarshal(body, &u); err != nil {
			t.Fatalf("a body that does not decode stored %d messages", len(posts))
		}
		msg := u.Message
		if msg == nil {
			msg = u.EditedMessage
		}
		if msg == nil || msg.From == nil || msg.From.ID != 1 {
			t.Fatalf("stored %+v from an update that is not the owner's: %s", posts, body)
		}
		for _, p := range posts {
			if p.TimelineScope != services.DefaultTimeline {
				t.Fatalf("the owner's message went to %q", p.TimelineScope)
			}
		}
	})
}
