package media

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
)

// MaxSpeechInput is the most characters one speech request carries (the
// OpenAI endpoint's limit); a longer text is cut at a sentence's end.
const MaxSpeechInput = 4096

// maxSpeechBytes bounds the audio read from the speech API.
const maxSpeechBytes = 20 << 20

// Speaker is services.Speaker on an OpenAI-compatible
// POST <URL>/audio/speech (OpenAI, a local TTS server): it asks for
// response_format "opus", an OGG/Opus file, what a Telegram voice note is.
type Speaker struct {
	// URL is the API base, e.g. https://api.openai.com/v1.
	URL    string
	Model  string
	Voice  string
	APIKey string
	Client *http.Client
}

var _ services.Speaker = (*Speaker)(nil)

// NewSpeaker returns a speaker for the API at url (nil when url is empty:
// no spoken replies). model defaults to tts-1 and voice to alloy.
func NewSpeaker(url, model, voice, apiKey string) *Speaker {
	if url == "" {
		return nil
	}
	if model == "" {
		model = "tts-1"
	}
	if voice == "" {
		voice = "alloy"
	}
	return &Speaker{URL: strings.TrimRight(url, "/"), Model: model, Voice: voice, APIKey: apiKey, Client: &http.Client{Timeout: 2 * time.Minute}}
}

// Speak sends text (cut to MaxSpeechInput characters) and returns the
// audio. Errors are EUNAVAILABLE, naming the server's answer; EINVALID
// for a text with nothing to say.
func (s *Speaker) Speak(ctx context.Context, text string) ([]byte, error) {
	text = SpeechInput(text)
	if text == "" {
		return nil, services.Errorf(services.EINVALID, "nothing to say")
	}
	body, _ := json.Marshal(map[string]string{"model": s.Model, "input": text, "voice": s.Voice, "response_format": "opus"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/audio/speech", bytes.NewReader(body))
	if err != nil {
		return nil, services.Errorf(services.EINVALID, "speech URL: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, &services.Error{Kind: services.EUNAVAILABLE, Message: "the speech service could not be reached", Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxSpeechBytes+1))
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, services.Errorf(services.EUNAVAILABLE, "the speech service answered %d: %s", resp.StatusCode, strings.TrimSpace(string(raw[:min(len(raw), 300)])))
	case err != nil:
		return nil, &services.Error{Kind: services.EUNAVAILABLE, Message: "the speech service's answer was cut off", Err: err}
	case len(raw) > maxSpeechBytes:
		return nil, services.Errorf(services.ETOOLARGE, "the speech service answered more than %s", services.HumanBytes(maxSpeechBytes))
	case len(raw) == 0:
		return nil, services.Errorf(services.EUNAVAILABLE, "the speech service answered no audio")
	}
	return raw, nil
}

// SpeechInput is text as one speech request carries it: trimmed, and cut
// to MaxSpeechInput characters at the last sentence's end that fits.
func SpeechInput(text string) string {
	text = strings.TrimSpace(text)
	r := []rune(text)
	if len(r) <= MaxSpeechInput {
		return text
	}
	cut := string(r[:MaxSpeechInput])
	if i := strings.LastIndexAny(cut, ".!?\n"); i > MaxSpeechInput/2 {
		cut = cut[:i+1]
	}
	return strings.TrimSpace(cut)
}
