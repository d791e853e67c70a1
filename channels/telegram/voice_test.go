package telegram

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// fakeSpeaker answers every text with an OGG stream, or with err.
type fakeSpeaker struct {
	mu    sync.Mutex
	texts []string
	err   error
}

func (s *fakeSpeaker) Speak(_ context.Context, text string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts = append(s.texts, text)
	if s.err != nil {
		return nil, s.err
	}
	return []byte("OggS\x00fake opus of " + text), nil
}

func (s *fakeSpeaker) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.texts...)
}

// An answer to be spoken arrives as its text, then its voice note (sent
// with sendVoice as OGG, the text without its Markdown); delivering it
// again sends nothing and asks the speech service nothing.
func TestDeliverSpeaksAfterTheText(t *testing.T) {
	t.Parallel()
	sp := &fakeSpeaker{}
	b, srv, _ := newStrictBot(t, func(o *options) { o.Speaker = sp })
	p := OutboundPayload{Key: "reply:2", ChatID: 1, ReplyToMessageID: 1, Timeline: "global", ReplyTo: 1, Text: "It is **sunny** today.", Speak: true}
	deliverLikeTheQueue(t, b, p)
	deliverLikeTheQueue(t, b, p)
	msgs := srv.Messages(1)
	if len(msgs) != 2 || msgs[0].Method != "sendMessage" || msgs[1].Method != "sendVoice" {
		t.Fatalf("messages: %+v", msgs)
	}
	if string(msgs[1].File) != "OggS\x00fake opus of It is sunny today." {
		t.Fatalf("voice note: %q", msgs[1].File)
	}
	if c := sp.calls(); len(c) != 1 {
		t.Fatalf("speech requests: %q", c)
	}
}

// A speech service that fails leaves the text as it is: the delivery
// succeeds, no voice note is sent, and a retry does not ask again. Without
// a speaker, Speak is ignored.
func TestDeliverSpeechFailureKeepsTheText(t *testing.T) {
	t.Parallel()
	sp := &fakeSpeaker{err: services.Errorf(services.EUNAVAILABLE, "the speech service answered 500")}
	b, srv, _ := newStrictBot(t, func(o *options) { o.Speaker = sp })
	p := OutboundPayload{Key: "reply:2", ChatID: 1, Timeline: "global", Text: "answer", Speak: true}
	raw, _ := json.Marshal(p)
	for range 2 {
		if err := b.Deliver(t.Context(), raw); err != nil {
			t.Fatal(err)
		}
	}
	if msgs := srv.Messages(1); len(msgs) != 1 || msgs[0].Text != "answer" || srv.Calls("sendVoice") != 0 {
		t.Fatalf("messages: %+v", msgs)
	}
	if c := sp.calls(); len(c) != 1 {
		t.Fatalf("speech requests: %q", c)
	}

	plain, srv2, _ := newStrictBot(t, nil)
	deliverLikeTheQueue(t, plain, p)
	if msgs := srv2.Messages(1); len(msgs) != 1 || srv2.Calls("sendVoice") != 0 {
		t.Fatalf("without a speaker: %+v", msgs)
	}
}

// voiceTx is a transaction in which the chat's /voice setting is on.
type voiceTx struct {
	services.Tx
	on bool
}

func (v voiceTx) VoiceRepliesOn(context.Context, services.Source, int64) (bool, error) {
	return v.on, nil
}

// The agent's answer to a voice note is spoken when a speaker is
// configured and the chat did not turn it off; nothing else is.
func TestRouterSpeaksAnswersToVoiceNotes(t *testing.T) {
	t.Parallel()
	voice := services.Message{ID: 3, TimelineScope: "global", Meta: services.MessageMeta{TelegramMeta: services.TelegramMeta{ChatID: 77, MessageID: 5},
		Files: []services.FileRef{{Kind: services.AttachVoice, MIMEType: "audio/ogg", Key: "uploads/a.ogg"}}}}
	text := services.Message{ID: 3, TimelineScope: "global", Meta: services.MessageMeta{TelegramMeta: services.TelegramMeta{ChatID: 77, MessageID: 5}}}
	answer := services.Message{ID: 8, Source: services.SourceAgent, Content: "answer"}
	notice := services.Message{ID: 8, Source: services.SourceSystem, Content: "The model failed"}
	for _, c := range []struct {
		name   string
		r      Router
		on     bool
		to     services.Message
		answer services.Message
		want   bool
	}{
		{"voice question", Router{Speak: true}, true, voice, answer, true},
		{"voice off", Router{Speak: true}, false, voice, answer, false},
		{"no speaker", Router{}, true, voice, answer, false},
		{"text question", Router{Speak: true}, true, text, answer, false},
		{"system notice", Router{Speak: true}, true, voice, notice, false},
	} {
		f := &fakes{}
		c.r.Queue = f
		if err := c.r.RouteReplyTx(t.Context(), voiceTx{on: c.on}, c.to, c.answer); err != nil {
			t.Fatal(err)
		}
		if n := f.notices(); len(n) != 1 || n[0].Speak != c.want {
			t.Errorf("%s: %+v; want Speak %v", c.name, n, c.want)
		}
	}
}
