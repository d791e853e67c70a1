package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// speechRequest is one POST /audio/speech the fake speech server received.
type speechRequest struct {
	Model, Input, Voice, ResponseFormat, Authorization string
}

// fakeSpeech is an OpenAI-compatible speech server: it answers an OGG
// stream naming the input, or HTTP status when it is set.
type fakeSpeech struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []speechRequest
	status int
}

func startSpeech(t *testing.T) *fakeSpeech {
	t.Helper()
	s := &fakeSpeech{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model          string `json:"model"`
			Input          string `json:"input"`
			Voice          string `json:"voice"`
			ResponseFormat string `json:"response_format"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/speech" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, speechRequest{body.Model, body.Input, body.Voice, body.ResponseFormat, r.Header.Get("Authorization")})
		status := s.status
		s.mu.Unlock()
		if status != 0 {
			http.Error(w, `{"error":{"message":"speech model overloaded"}}`, status)
			return
		}
		w.Header().Set("Content-Type", "audio/ogg")
		_, _ = w.Write([]byte("OggS\x00opus: " + body.Input))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeSpeech) requests() []speechRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]speechRequest(nil), s.reqs...)
}

// voiceInstance is mediaInstance with transcription on the fake model and
// speech on speech.
func voiceInstance(t *testing.T, speech *fakeSpeech) (*tgtest.Strict, *llmtest.Server) {
	t.Helper()
	_, strict, model := mediaInstance(t, func(o *app.Config, m *llmtest.Server) {
		o.Media.TranscribeURL = m.OpenAIBaseURL()
		o.Media.TTSURL, o.Media.TTSModel, o.Media.TTSVoice, o.Media.TTSAPIKey = speech.URL+"/v1", "tts-1", "nova", "sk-tts"
	})
	model.SetTranscribe(func(llmtest.Transcription) llmtest.TranscriptReply {
		return llmtest.TranscriptReply{Text: "What is the weather"}
	})
	return strict, model
}

func sendVoiceNote(strict *tgtest.Strict) {
	strict.SendMedia(owner, tgtest.Voice, "", tgtest.File{Data: []byte("OggS\x00 question"), MIMEType: "audio/ogg", Duration: 2})
}

// TestTelegramVoiceQuestionGetsAVoiceNote: with TTS_URL set, a voice note
// is answered with the text and then a voice note of it (sendVoice, the
// speech server's OGG/Opus bytes); a text question is answered with text;
// after /voice off a voice note is answered with text only, and /voice on
// brings the voice back.
func TestTelegramVoiceQuestionGetsAVoiceNote(t *testing.T) {
	t.Parallel()
	speech := startSpeech(t)
	strict, _ := voiceInstance(t, speech)

	sendVoiceNote(strict)
	got := waitReply(t, strict, 2, "")
	if got[0].Method != "sendMessage" || !strings.Contains(got[0].Text, "What is the weather") || got[1].Method != "sendVoice" {
		t.Fatalf("answer: %s %q, then %s", got[0].Method, got[0].Text, got[1].Method)
	}
	reqs := speech.requests()
	if len(reqs) != 1 || reqs[0].Model != "tts-1" || reqs[0].Voice != "nova" || reqs[0].ResponseFormat != "opus" ||
		reqs[0].Authorization != "Bearer sk-tts" || !strings.Contains(reqs[0].Input, "What is the weather") {
		t.Fatalf("speech requests: %+v", reqs)
	}
	if string(got[1].File) != "OggS\x00opus: "+reqs[0].Input {
		t.Fatalf("voice note bytes: %q", got[1].File)
	}

	strict.Send(owner, "a typed question")
	waitReply(t, strict, 3, "a typed question")
	strict.Send(owner, "/voice off")
	waitReply(t, strict, 4, "Spoken replies off")
	sendVoiceNote(strict)
	waitReply(t, strict, 5, "What is the weather")
	// The chat's deliveries go in order: had the voice note been spoken,
	// it would come before the answer to this.
	strict.Send(owner, "/voice")
	waitReply(t, strict, 6, "Spoken replies are off")
	if strict.Calls("sendVoice") != 1 || len(speech.requests()) != 1 {
		t.Fatalf("voice notes after /voice off: %d sent, %d spoken", strict.Calls("sendVoice"), len(speech.requests()))
	}

	strict.Send(owner, "/voice on")
	waitReply(t, strict, 7, "Spoken replies on")
	sendVoiceNote(strict)
	if got = waitReply(t, strict, 9, ""); got[8].Method != "sendVoice" {
		t.Fatalf("after /voice on: %s", got[8].Method)
	}
}

// TestTelegramVoiceAnswerWhenSpeechFails: a speech server answering HTTP
// 500 leaves the answer as text, delivered once; no voice note is sent and
// the speech server is asked once.
func TestTelegramVoiceAnswerWhenSpeechFails(t *testing.T) {
	t.Parallel()
	speech := startSpeech(t)
	speech.status = http.StatusInternalServerError
	strict, _ := voiceInstance(t, speech)
	sendVoiceNote(strict)
	waitReply(t, strict, 1, "What is the weather")
	strict.Send(owner, "/status")
	got := waitReply(t, strict, 2, "")
	if got[1].Method != "sendMessage" || strict.Calls("sendVoice") != 0 || len(speech.requests()) != 1 {
		t.Fatalf("after a speech failure: %s, %d voice notes, %d speech requests", got[1].Method, strict.Calls("sendVoice"), len(speech.requests()))
	}
}

// TestVoiceCommandWithoutSpeech: without TTS_URL, /voice names the
// variable, and a voice note is answered with text only.
func TestVoiceCommandWithoutSpeech(t *testing.T) {
	t.Parallel()
	_, strict, model := mediaInstance(t, func(o *app.Config, m *llmtest.Server) { o.Media.TranscribeURL = m.OpenAIBaseURL() })
	model.SetTranscribe(func(llmtest.Transcription) llmtest.TranscriptReply { return llmtest.TranscriptReply{Text: "hello"} })
	strict.Send(owner, "/voice on")
	waitReply(t, strict, 1, "set TTS_URL")
	sendVoiceNote(strict)
	waitReply(t, strict, 2, "hello")
	strict.Send(owner, "/status")
	if got := waitReply(t, strict, 3, ""); got[2].Method != "sendMessage" || strict.Calls("sendVoice") != 0 {
		t.Fatalf("without TTS_URL: %s, %d voice notes", got[2].Method, strict.Calls("sendVoice"))
	}
}
