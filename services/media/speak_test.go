package media

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// The speaker posts the OpenAI speech request (model, input, voice, opus,
// the bearer key) and returns the audio; a server error is EUNAVAILABLE
// naming the answer.
func TestSpeakerSpeaks(t *testing.T) {
	t.Parallel()
	var got map[string]string
	var auth string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/speech" || r.Header.Get("Content-Type") != "application/json" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		auth = r.Header.Get("Authorization")
		if status != http.StatusOK {
			http.Error(w, "overloaded", status)
			return
		}
		_, _ = w.Write([]byte("OggS audio"))
	}))
	defer srv.Close()
	if NewSpeaker("", "m", "v", "") != nil {
		t.Fatal("a speaker without a URL")
	}
	s := NewSpeaker(srv.URL+"/v1/", "", "", "sk-1")
	audio, err := s.Speak(t.Context(), "  Hello there.  ")
	if err != nil || string(audio) != "OggS audio" {
		t.Fatalf("%q %v", audio, err)
	}
	want := map[string]string{"model": "tts-1", "input": "Hello there.", "voice": "alloy", "response_format": "opus"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q; want %q", k, got[k], v)
		}
	}
	if auth != "Bearer sk-1" {
		t.Errorf("authorization %q", auth)
	}
	status = http.StatusInternalServerError
	if _, err := s.Speak(t.Context(), "again"); !services.IsKind(err, services.EUNAVAILABLE) || !strings.Contains(err.Error(), "500") {
		t.Fatalf("server error: %v", err)
	}
	if _, err := s.Speak(t.Context(), " "); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("blank text: %v", err)
	}
}

// A text past MaxSpeechInput is cut at a sentence's end.
func TestSpeechInputIsCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("One sentence here. ", 400)
	in := SpeechInput(long)
	if n := len([]rune(in)); n > MaxSpeechInput || n < MaxSpeechInput/2 || !strings.HasSuffix(in, ".") {
		t.Fatalf("%d characters, ends %q", n, in[len(in)-10:])
	}
	if SpeechInput(" short ") != "short" {
		t.Fatal("short text changed")
	}
}
